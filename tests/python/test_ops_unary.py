"""Unary math, rounding and activation ops (and their backward formulas) against PyTorch
CPU, all input variants; integer/bool inputs of float-only math promote like CPU."""
import pytest
import torch
import torch.nn.functional as F

from op_harness import ALL, BF16, F32, FLOATS, INTS, NUMERIC, Input, OpSpec, cases, check, check_case, make

UNARY_VARIANTS = ("contig", "noncontig", "0dim", "empty")
PROMOTE = FLOATS + (torch.int64, torch.int32, torch.uint8, torch.bool)  # int/bool -> float32


def unary(name, fn, dtypes=FLOATS, **kw):
    kw.setdefault("shapes", ((3, 4),))
    return OpSpec(name, fn, dtypes=dtypes, **kw)


POS = (0.1, 4.0)
OPS = [
    unary("exp", torch.exp, PROMOTE, tol_scale=2),
    unary("expm1", torch.expm1, PROMOTE, tol_scale=2),
    unary("log", torch.log, PROMOTE, domain=POS, tol_scale=2),
    unary("log1p", torch.log1p, PROMOTE, domain=(-0.9, 3.0), tol_scale=2),
    unary("log2", torch.log2, PROMOTE, domain=POS, tol_scale=2),
    unary("log10", torch.log10, PROMOTE, domain=POS, tol_scale=2),
    unary("sqrt", torch.sqrt, PROMOTE, domain=(0.0, 4.0), grad_tol_scale=4),
    unary("rsqrt", torch.rsqrt, PROMOTE, domain=POS, tol_scale=2),
    unary("sin", torch.sin, PROMOTE, tol_scale=2),
    unary("cos", torch.cos, PROMOTE, tol_scale=2),
    unary("tan", torch.tan, PROMOTE, domain=(-1.2, 1.2), tol_scale=4),
    unary("tanh", torch.tanh, PROMOTE, tol_scale=2),
    unary("sigmoid", torch.sigmoid, PROMOTE, tol_scale=2),
    unary("erf", torch.erf, PROMOTE, tol_scale=2),
    unary("reciprocal", torch.reciprocal, PROMOTE, nonzero=(0,), tol_scale=2),
    unary("floor", torch.floor, NUMERIC),
    unary("ceil", torch.ceil, NUMERIC),
    unary("round", torch.round, NUMERIC),
    unary("trunc", torch.trunc, NUMERIC),
    unary("neg", torch.neg, NUMERIC + (torch.bool,)),
    unary("abs", torch.abs, ALL),
    unary("sign", torch.sign, ALL),
    unary("relu", torch.relu, NUMERIC),
    unary("gelu", F.gelu, FLOATS, tol_scale=2),
    unary("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), FLOATS, tol_scale=2),
    unary("silu", F.silu, FLOATS, tol_scale=2),
    unary("threshold", lambda x: F.threshold(x, 0.5, -2.0), NUMERIC),
    unary("relu_via_threshold_bwd", lambda x: F.relu(x) * x, FLOATS),
    unary("fill_", lambda x: x.clone().fill_(2.5), ALL),
    unary("fill_tensor", lambda x: x.clone().fill_(torch.tensor(3, device=x.device)), ALL, grad=False),
    unary("zero_", lambda x: x.clone().zero_(), ALL),
    unary("chain", lambda x: torch.tanh(torch.exp(x * 0.3) - 1).sigmoid(), FLOATS, tol_scale=4),
    # csrc/lowering/from_aten/activation.cpp (structured .out ops: Python decompositions before)
    unary("softplus", F.softplus, FLOATS, tol_scale=2),
    unary("softplus_beta_threshold", lambda x: F.softplus(x, beta=2.0, threshold=3.0), FLOATS, domain=(-4.0, 4.0),
          tol_scale=2),
    unary("logsigmoid", F.logsigmoid, FLOATS, domain=(-20.0, 20.0), tol_scale=2),
    unary("glu", F.glu, FLOATS, shapes=((3, 4),), variants=("contig", "noncontig", "empty"), tol_scale=2),
    unary("glu_dim0", lambda x: F.glu(x, 0), FLOATS, shapes=((4, 3),), variants=("contig", "noncontig"), tol_scale=2),
    unary("mish", F.mish, FLOATS, domain=(-6.0, 25.0), tol_scale=4),
    unary("leaky_relu", lambda x: F.leaky_relu(x, 0.2), FLOATS),
    unary("elu", F.elu, FLOATS, tol_scale=2),
    unary("celu", lambda x: F.celu(x, 1.5), FLOATS, tol_scale=2),
    unary("selu", F.selu, FLOATS, tol_scale=2),
    unary("hardtanh", lambda x: F.hardtanh(x, -1.5, 2.0), FLOATS),
    unary("hardtanh_int", lambda x: F.hardtanh(x, -1.0, 2.0), INTS),
    unary("relu6", F.relu6, FLOATS, domain=(-3.0, 8.0)),
    unary("hardswish", F.hardswish, FLOATS, domain=(-5.0, 5.0)),
    unary("hardsigmoid", F.hardsigmoid, FLOATS, domain=(-5.0, 5.0)),
]


@pytest.mark.parametrize("spec,dtype,variant,mode", cases(OPS))
def test_op(spec, dtype, variant, mode):
    check_case(spec, dtype, variant, mode)


def _out(a, dtype=None):
    return torch.empty(0, dtype=dtype or a.dtype, device=a.device)


INPLACE = [
    ("exp_", lambda a: a.clone().exp_(), FLOATS),
    ("sqrt_", lambda a: a.clone().abs_().sqrt_(), FLOATS),
    ("neg_", lambda a: a.clone().neg_(), NUMERIC),
    ("abs_", lambda a: a.clone().abs_(), NUMERIC),
    ("floor_", lambda a: a.clone().floor_(), FLOATS),
    ("relu_", lambda a: a.clone().relu_(), NUMERIC),
    ("sigmoid_", lambda a: a.clone().sigmoid_(), FLOATS),
    ("gelu_", lambda a: F.gelu(a.clone()), FLOATS),
    ("silu_", lambda a: F.silu(a.clone(), inplace=True), FLOATS),
    ("threshold_", lambda a: F.threshold(a.clone(), 0.0, 1.0, inplace=True), FLOATS),
    ("exp_out", lambda a: torch.exp(a, out=_out(a)), FLOATS),
    ("exp_out_int_to_f32", lambda a: torch.exp(a, out=_out(a, torch.float32)), (torch.int64,)),
    ("tanh_out", lambda a: torch.tanh(a, out=_out(a)), FLOATS),
    ("sign_out", lambda a: torch.sign(a, out=_out(a)), NUMERIC),
    ("round_out", lambda a: torch.round(a, out=_out(a)), FLOATS),
    ("log2_out", lambda a: torch.log2(a.abs() + 1, out=_out(a)), FLOATS),
    ("leaky_relu_", lambda a: F.leaky_relu(a.clone(), 0.1, inplace=True), FLOATS),
    ("elu_", lambda a: F.elu(a.clone(), inplace=True), FLOATS),
    ("relu6_", lambda a: F.relu6(a.clone(), inplace=True), FLOATS),
    ("hardswish_", lambda a: F.hardswish(a.clone(), inplace=True), FLOATS),
    ("hardsigmoid_", lambda a: F.hardsigmoid(a.clone(), inplace=True), FLOATS),
    ("mish_", lambda a: F.mish(a.clone(), inplace=True), FLOATS),
    ("softplus_out", lambda a: torch._C._nn.softplus(a, out=_out(a)), FLOATS),
    ("glu_out", lambda a: torch._C._nn.glu(a, -1, out=_out(a)), FLOATS),
]


@pytest.mark.parametrize("name,fn,dtype", [pytest.param(n, f, d, id=f"{n}-{str(d)[6:]}")
                                           for n, f, ds in INPLACE for d in ds])
def test_inplace_and_out(name, fn, dtype):
    gen = torch.Generator().manual_seed(11)
    check(fn, [Input(make((3, 4), dtype, gen))], grad=dtype.is_floating_point and "out" not in name,
          scale=2)


def test_special_values():
    x = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-30, -2.5, 2.5, 0.5, 1.5])
    for fn in (torch.exp, torch.log, torch.sqrt, torch.rsqrt, torch.tanh, torch.sigmoid, torch.abs,
               torch.sign, torch.floor, torch.ceil, torch.round, torch.trunc, torch.reciprocal,
               torch.relu, torch.erf, torch.log1p, torch.expm1):
        check(fn, [Input(x)], grad=False, scale=2)


def test_gelu_bad_approximate():
    with pytest.raises(RuntimeError):
        F.gelu(torch.ones(2, device="tpu"), approximate="fast")


def test_bessel_large_arguments():
    """Large |x|: i0/i1 overflow to +-inf (NaN at +-inf, as CPU), k0/k1 underflow to 0, and the scaled forms keep their
    finite asymptotic values (found by the fuzzer: libstdc++ threw "Argument x too large in
    __bessel_ik" past ~1e8, and e^-|x| * I(x) gave 0 * inf = NaN past ~710)."""
    x = torch.tensor([1e9, -800.0, 710.0, 5.0, -3.0, 0.5, -1e30, 2147483647.0, float("inf"), float("-inf")])
    pos = x.abs()
    for f, arg in [(torch.special.i0, x), (torch.special.i1, x), (torch.special.i0e, x), (torch.special.i1e, x),
                   (torch.special.modified_bessel_k0, pos), (torch.special.modified_bessel_k1, pos),
                   (torch.special.scaled_modified_bessel_k0, pos), (torch.special.scaled_modified_bessel_k1, pos)]:
        torch.testing.assert_close(f(arg.to("tpu")).cpu(), f(arg), rtol=1e-5, atol=0, equal_nan=True,
                                   msg=lambda m: f"{f.__name__}: {m}")
    xi = torch.tensor([2147483647, -5], dtype=torch.int32)  # integers promote to float
    torch.testing.assert_close(torch.special.i1e(xi.to("tpu")).cpu(), torch.special.i1e(xi), rtol=1e-5, atol=0)
