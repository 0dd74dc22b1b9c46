"""Binary pointwise ops (arithmetic, comparison, logical, bitwise, where, clamp, lerp,
addcmul/addcdiv) against PyTorch CPU: forward and backward, all input variants, plus
in-place and out= forms for a representative subset."""
import pytest
import torch

from op_harness import ALL, BF16, F32, FLOATS, INTS, NUMERIC, OpSpec, cases, check, check_case, Input, make, modes

BIN_SHAPES = ((3, 4), (3, 4))
BIN_BCAST = ((2, 1, 4), (3, 4))
NO_BOOL = NUMERIC
SIGNED = FLOATS + (torch.int64, torch.int32, torch.int8)


def binary(name, fn, dtypes=NO_BOOL, grad=True, scalar=True, **kw):
    return OpSpec(name, fn, dtypes=dtypes, grad=grad, shapes=BIN_SHAPES, broadcast=BIN_BCAST,
                  scalar_args=(1,) if scalar else (), **kw)


OPS = [
    binary("add", torch.add, ALL),
    binary("add_alpha", lambda a, b: torch.add(a, b, alpha=2), NO_BOOL),
    binary("sub", torch.sub, NO_BOOL),
    binary("sub_alpha", lambda a, b: torch.sub(a, b, alpha=3), NO_BOOL),
    binary("rsub", torch.rsub, NO_BOOL),
    binary("mul", torch.mul, ALL),
    binary("div", torch.div, NO_BOOL, nonzero=(1,)),
    binary("div_trunc", lambda a, b: torch.div(a, b, rounding_mode="trunc"), NO_BOOL, grad=False, nonzero=(1,)),
    binary("div_floor", lambda a, b: torch.div(a, b, rounding_mode="floor"), NO_BOOL, grad=False, nonzero=(1,)),
    binary("floor_divide", torch.floor_divide, NO_BOOL, grad=False, nonzero=(1,)),
    binary("remainder", torch.remainder, NO_BOOL, nonzero=(1,)),
    binary("fmod", torch.fmod, NO_BOOL, nonzero=(1,)),
    binary("pow", torch.pow, FLOATS, domains={0: (0.5, 2.0), 1: (-2.0, 2.0)}, tol_scale=4),
    binary("pow_int", torch.pow, INTS, grad=False, domains={0: (-3, 4), 1: (0, 4)}),
    binary("pow_scalar_base", lambda a, b: torch.pow(2.5, b), FLOATS, scalar=False, tol_scale=4),
    binary("pow_sq", lambda a, b: a ** 2 + b, NO_BOOL, scalar=False),
    binary("pow_half", lambda a, b: a ** 0.5 * b, FLOATS, scalar=False, domains={0: (0.5, 3)}, tol_scale=4),
    binary("maximum", torch.maximum, ALL, scalar=False),
    binary("minimum", torch.minimum, ALL, scalar=False),
    binary("atan2", torch.atan2, FLOATS + (torch.int64,), scalar=False, tol_scale=4),
    binary("eq", torch.eq, ALL, grad=False),
    binary("ne", torch.ne, ALL, grad=False),
    binary("lt", torch.lt, NO_BOOL, grad=False),
    binary("le", torch.le, NO_BOOL, grad=False),
    binary("gt", torch.gt, NO_BOOL, grad=False),
    binary("ge", torch.ge, NO_BOOL, grad=False),
    binary("logical_and", torch.logical_and, ALL, grad=False, scalar=False),
    binary("logical_or", torch.logical_or, ALL, grad=False, scalar=False),
    binary("logical_xor", torch.logical_xor, ALL, grad=False, scalar=False),
    binary("bitwise_and", torch.bitwise_and, INTS + (torch.bool,), grad=False),
    binary("bitwise_or", torch.bitwise_or, INTS + (torch.bool,), grad=False),
    binary("bitwise_xor", torch.bitwise_xor, INTS + (torch.bool,), grad=False),
    binary("clamp_min_t", torch.clamp_min, NO_BOOL, scalar=True),
    binary("clamp_max_t", torch.clamp_max, NO_BOOL, scalar=True),
    OpSpec("clamp", lambda a: torch.clamp(a, -1, 2), NO_BOOL),
    OpSpec("clamp_float_bounds", lambda a: torch.clamp(a, min=-0.5, max=1.5), FLOATS),
    OpSpec("clamp_min", lambda a: torch.clamp(a, min=0), NO_BOOL),
    OpSpec("clamp_max", lambda a: torch.clamp(a, max=1), NO_BOOL),
    OpSpec("clamp_tensor", lambda a, lo, hi: torch.clamp(a, lo, hi), NO_BOOL,
           shapes=((3, 4), (3, 4), (4,)), broadcast=((2, 1, 4), (3, 4), (4,)),
           domains={1: (-3, 0), 2: (0, 3)}),
    OpSpec("where", lambda c, a, b: torch.where(c > 0, a, b), ALL,
           shapes=((3, 4), (3, 4), (3, 4)), broadcast=((3, 1), (2, 1, 4), (4,)), domains={0: (-1, 2)}),
    OpSpec("where_scalar", lambda c, a: torch.where(c > 0, a, 0.5), FLOATS,
           shapes=((3, 4), (3, 4)), broadcast=((3, 1), (2, 1, 4))),
    OpSpec("lerp_scalar", lambda a, b: torch.lerp(a, b, 0.3), FLOATS, shapes=BIN_SHAPES, broadcast=BIN_BCAST),
    OpSpec("lerp_tensor", torch.lerp, FLOATS, shapes=BIN_SHAPES + ((3, 4),),
           broadcast=((2, 1, 4), (3, 4), (4,)), domains={2: (0, 1)}),
    OpSpec("addcmul", lambda a, b, c: torch.addcmul(a, b, c, value=0.5), FLOATS,
           shapes=BIN_SHAPES + ((3, 4),), broadcast=((2, 1, 4), (3, 4), (4,))),
    OpSpec("addcdiv", lambda a, b, c: torch.addcdiv(a, b, c, value=-1.5), FLOATS,
           shapes=BIN_SHAPES + ((3, 4),), broadcast=((2, 1, 4), (3, 4), (4,)), nonzero=(2,), tol_scale=2),
    binary("python_ops", lambda a, b: (a + b) * 2 - b / 3, FLOATS, scalar=True, nonzero=()),
]


@pytest.mark.parametrize("spec,dtype,variant,mode", cases(OPS))
def test_op(spec, dtype, variant, mode):
    check_case(spec, dtype, variant, mode)


# --- in-place and out= forms ---------------------------------------------------------------
def _out(a, dtype=None):
    return torch.empty(0, dtype=dtype or a.dtype, device=a.device)


INPLACE = [
    ("add_", lambda a, b: a.clone().add_(b, alpha=2), NO_BOOL),
    ("sub_", lambda a, b: a.clone().sub_(b), NO_BOOL),
    ("mul_", lambda a, b: a.clone().mul_(b), ALL),
    ("div_", lambda a, b: a.clone().div_(b.abs() + 1), FLOATS),
    ("div_floor_", lambda a, b: a.clone().div_(b.abs() + 1, rounding_mode="floor"), SIGNED),
    ("floor_divide_", lambda a, b: a.detach().clone().floor_divide_(b.detach().abs() + 1), SIGNED),  # no derivative
    ("remainder_", lambda a, b: a.clone().remainder_(b.abs() + 1), SIGNED),
    ("fmod_", lambda a, b: a.clone().fmod_(b.abs() + 1), SIGNED),
    ("pow_", lambda a, b: a.clone().abs().pow_(2), NO_BOOL),
    ("clamp_", lambda a, b: a.clone().clamp_(-1, 1), NO_BOOL),
    ("clamp_min_", lambda a, b: a.clone().clamp_min_(0), NO_BOOL),
    ("lerp_", lambda a, b: a.clone().lerp_(b, 0.25), FLOATS),
    ("addcmul_", lambda a, b: a.clone().addcmul_(a, b, value=2), FLOATS),
    ("addcdiv_", lambda a, b: a.clone().addcdiv_(a, b.abs() + 1, value=2), FLOATS),
    ("logical_and_", lambda a, b: a.clone().logical_and_(b), ALL),
    ("bitwise_xor_", lambda a, b: a.clone().bitwise_xor_(b), INTS + (torch.bool,)),
    ("eq_", lambda a, b: a.clone().eq_(b), NO_BOOL),
    ("lt_", lambda a, b: a.clone().lt_(b), NO_BOOL),
    ("add_out", lambda a, b: torch.add(a, b, out=_out(a)), ALL),
    ("mul_out", lambda a, b: torch.mul(a, b, out=_out(a)), ALL),
    ("sub_out_f32", lambda a, b: torch.sub(a, b, out=_out(a, torch.float32)), NO_BOOL),
    ("div_out", lambda a, b: torch.div(a, b.abs() + 1, out=_out(a)), FLOATS),
    ("maximum_out", lambda a, b: torch.maximum(a, b, out=_out(a)), NO_BOOL),
    ("pow_out", lambda a, b: torch.pow(a.abs(), 2, out=_out(a)), NO_BOOL),
    ("clamp_out", lambda a, b: torch.clamp(a, -1, 1, out=_out(a)), NO_BOOL),
    ("where_out", lambda a, b: torch.where(a > b, a, b, out=_out(a)), NO_BOOL),
    ("gt_out", lambda a, b: torch.gt(a, b, out=_out(a, torch.bool)), NO_BOOL),
    ("logical_or_out", lambda a, b: torch.logical_or(a, b, out=_out(a, torch.bool)), ALL),
    ("floor_divide_out", lambda a, b: torch.floor_divide(a, b.abs() + 1, out=_out(a)), SIGNED),
    ("remainder_out", lambda a, b: torch.remainder(a, b.abs() + 1, out=_out(a)), SIGNED),
    ("addcmul_out", lambda a, b: torch.addcmul(a, a, b, out=_out(a)), FLOATS),
    ("lerp_out", lambda a, b: torch.lerp(a, b, 0.5, out=_out(a)), FLOATS),
]


@pytest.mark.parametrize("mode", modes())
@pytest.mark.parametrize("name,fn,dtype", [pytest.param(n, f, d, id=f"{n}-{str(d)[6:]}")
                                           for n, f, ds in INPLACE for d in ds])
def test_inplace_and_out(name, fn, dtype, mode):
    gen = torch.Generator().manual_seed(7)
    args = [Input(make((3, 4), dtype, gen)), Input(make((3, 4), dtype, gen))]
    check(fn, args, grad=dtype.is_floating_point and "out" not in name, mode=mode)


def test_inplace_on_noncontiguous_self():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    t = base.to("tpu")
    t.t()[::2].mul_(2).add_(1)
    base.t()[::2].mul_(2).add_(1)
    assert torch.equal(t.cpu(), base)


def test_out_resizes_and_casts():
    a = torch.randn(3, 4)
    out = torch.empty(7, dtype=torch.float64, device="tpu")
    torch.add(a.to("tpu"), 1, out=out)
    assert out.shape == (3, 4) and out.dtype == torch.float64
    torch.testing.assert_close(out.cpu(), (a + 1).double())


def test_inplace_type_promotion_error():
    a = torch.ones(3, dtype=torch.int64, device="tpu")
    with pytest.raises(RuntimeError, match="can't be cast"):
        a.add_(torch.ones(3, device="tpu"))
    with pytest.raises(RuntimeError):
        torch.ones(3, dtype=torch.int64).add_(torch.ones(3))  # CPU agrees


def test_division_special_values():
    x = torch.tensor([1.0, -1.0, 0.0, 5.5, -5.5, 7.0, -7.0])
    y = torch.tensor([0.0, 0.0, 0.0, 2.0, 2.0, -2.0, -2.0])
    for mode in (None, "trunc", "floor"):
        check(lambda a, b: torch.div(a, b, rounding_mode=mode), [Input(x), Input(y)], grad=False)
    check(torch.remainder, [Input(x[3:]), Input(y[3:])], grad=False)
    check(torch.fmod, [Input(x[3:]), Input(y[3:])], grad=False)


def test_integer_overflow_wraps_like_cpu():
    a = torch.tensor([120, -120, 100], dtype=torch.int8)
    check(lambda x: x + x, [Input(a)], grad=False)
    u = torch.tensor([250, 3], dtype=torch.uint8)
    check(lambda x: x * 2 - 5, [Input(u)], grad=False)


def test_same_tensor_twice_then_two_tensors():
    """A call with one tensor in two argument slots (x * x) must not be replayed for two
    tensors of the same shapes (regression: the per-op fast path bound argument 0 twice)."""
    x = torch.arange(12.0).reshape(3, 4)
    y = torch.full((3, 4), 2.0)
    xt, yt = x.to("tpu"), y.to("tpu")
    assert torch.equal((xt * xt).cpu(), x * x)
    assert torch.equal((yt * xt).cpu(), y * x)
    assert torch.equal((xt * yt).cpu(), x * y)
    assert torch.equal(torch.add(yt, xt, alpha=2).cpu(), torch.add(y, x, alpha=2))
    assert torch.equal(torch.add(xt, xt, alpha=2).cpu(), torch.add(x, x, alpha=2))


def test_integer_division_of_an_empty_tensor_by_zero():
    """An empty integer tensor divided by a zero Scalar gives an empty result, as on CPU (no
    element is divided); a non-empty one still raises ZeroDivisionError."""
    e = torch.empty(0, 3, dtype=torch.int64)
    for f in (lambda a: a // 0, lambda a: a % 0, lambda a: torch.fmod(a, 0),
              lambda a: torch.div(a, 0, rounding_mode="trunc")):
        assert f(e.to("tpu")).cpu().shape == f(e).shape
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        (torch.ones(2, dtype=torch.int64, device="tpu") // 0).cpu()


def test_lerp_takes_a_zero_dim_weight_of_any_dtype():
    """As on CPU, a 0-dim weight is a scalar whatever its dtype (only end and a weight of rank
    >= 1 must have self's dtype, tests/python/test_errors.py)."""
    s, e = torch.randn(3).bfloat16(), torch.randn(3).bfloat16()
    for w in (torch.tensor(1, dtype=torch.int32), torch.tensor(0.25)):
        torch.testing.assert_close(torch.lerp(s.to("tpu"), e.to("tpu"), w.to("tpu")).cpu(), torch.lerp(s, e, w))


@pytest.mark.parametrize("dtype", [F32, BF16, torch.float64])
def test_lerp_number_weight_computes_one_side(dtype):
    """A number weight picks its side of PyTorch's two-sided formula when lowered (|w| < 0.5:
    self + w * (end - self), else end - (end - self) * (1 - w)): the same bits as a tensor weight
    of that value, whose select computes both sides, and CPU's values, on both sides of 0.5."""
    gen = torch.Generator().manual_seed(3)
    s, e = torch.randn(64, generator=gen).to(dtype), torch.randn(64, generator=gen).to(dtype)
    sd, ed = s.to("tpu"), e.to("tpu")
    # Weights exact in every dtype (a tensor weight has self's dtype), then one that rounds to
    # 0.5 in f32 (the side is chosen in the compute dtype) and is below it in f64.
    for w in (0.3125, 0.4921875, 0.5, 0.75, -0.4921875, -0.625, 1.5, -2.0, 0.0, 1.0, float("nan"), float("inf"),
              0.49999999):
        got = torch.lerp(sd, ed, w).cpu()
        if w == 0.49999999 and dtype != torch.float64:
            torch.testing.assert_close(got, torch.lerp(s, e, w))
            continue
        by_tensor = torch.lerp(sd, ed, torch.full((64,), w, dtype=dtype, device="tpu")).cpu()
        assert torch.equal(got.view(torch.uint8), by_tensor.view(torch.uint8)) or (got.isnan() & by_tensor.isnan()).all(), w
        torch.testing.assert_close(got, torch.lerp(s, e, w), equal_nan=True, msg=f"weight {w}")
        torch.testing.assert_close(sd.clone().lerp_(ed, w).cpu(), got, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, F32, BF16])
@pytest.mark.parametrize("invert", [False, True])
def test_isin_matches_cpu(dtype, invert):
    """torch.isin (csrc/lowering/from_aten/binary_extra.cpp; HF generate's stop-token check):
    tensor/tensor, 0-dim, scalar on either side, empty and non-contiguous sets, NaN, mixed dtypes."""
    gen = torch.Generator().manual_seed(5)
    e = torch.randint(0, 10, (4, 5), generator=gen).to(dtype)
    t = torch.randint(0, 10, (3, 2), generator=gen).to(dtype)
    if dtype.is_floating_point:
        e[0, 0], t[0, 0] = float("nan"), float("nan")
    kw = {"invert": invert}
    check(lambda x, y: torch.isin(x, y, **kw), [Input(e), Input(t)], grad=False)
    check(lambda x, y: torch.isin(x, y, **kw), [Input(e), Input(t[1, 1].clone())], grad=False)
    # (a non-contiguous test set makes CPU raise: its kernel .view()s it)
    check(lambda x, y: torch.isin(x, y, **kw), [Input(e, lambda b: b[:, ::2].t()), Input(t)], grad=False)
    check(lambda x, y: torch.isin(x, y, **kw), [Input(e), Input(t[:0])], grad=False)
    check(lambda x: torch.isin(x, 3, **kw), [Input(e)], grad=False)
    check(lambda y: torch.isin(3, y, **kw), [Input(t)], grad=False)
    check(lambda x, y: torch.isin(x, y, **kw), [Input(e), Input(t.to(torch.float32) + 0.5)], grad=False)
