"""Matmul precision on tpu: the three modes' error levels against float64 for every matmul
entry point (mm, bmm, addmm, baddbmm, matmul, linear, einsum), DEFAULT's bf16 rounding is
round-to-nearest-even bit for bit, bf16/f16 inputs are unaffected, and the mapping of
torch.set_float32_matmul_precision / torch.backends.tpu.

Error metric (also used by `python -m torch_tpu.bench matmul`): componentwise relative
error max |C - C64| / (|A| @ |B|), the quantity error bounds are stated in. Measured at
K = 256..512 on randn inputs: DEFAULT ~2^-10, HIGH ~2^-19, HIGHEST ~2^-22."""
import math

import pytest
import torch

import torch_tpu
from torch_tpu import Precision

# (lower, upper) bounds of log2(error) per mode, with margins around the measured values.
LEVELS = {Precision.DEFAULT: (-12.5, -7.0), Precision.HIGH: (-22.0, -15.0), Precision.HIGHEST: (-40.0, -20.5)}


def _err(got, a, b):
    a64, b64 = a.double(), b.double()
    exact = torch.matmul(a64, b64)
    mag = torch.matmul(a64.abs(), b64.abs())
    return ((got.double() - exact).abs() / mag).max().item()


@pytest.fixture(autouse=True)
def _restore_precision():
    old = torch_tpu.get_matmul_precision()
    old_torch = torch.get_float32_matmul_precision()
    yield
    torch.set_float32_matmul_precision(old_torch)
    torch_tpu.set_matmul_precision(old)


def _ops():
    g = torch.Generator().manual_seed(0)
    a2, b2 = torch.randn(96, 384, generator=g), torch.randn(384, 80, generator=g)
    a3, b3 = torch.randn(3, 40, 256, generator=g), torch.randn(3, 256, 24, generator=g)
    bias = torch.randn(80, generator=g) * 0  # addmm with beta=0 keeps the metric pure
    return {
        "mm": (lambda x, y: torch.mm(x, y), a2, b2),
        "matmul": (lambda x, y: x @ y, a3, b3),
        "bmm": (lambda x, y: torch.bmm(x, y), a3, b3),
        "addmm": (lambda x, y: torch.addmm(bias.to(x.device), x, y), a2, b2),
        "baddbmm": (lambda x, y: torch.baddbmm(torch.zeros(1, device=x.device), x, y), a3, b3),
        "linear": (lambda x, y: torch.nn.functional.linear(x, y.t().contiguous()), a2, b2),
        "einsum": (lambda x, y: torch.einsum("bmk,bkn->bmn", x, y), a3, b3),
    }


@pytest.mark.parametrize("mode", list(Precision))
@pytest.mark.parametrize("name", list(_ops()))
def test_error_levels(name, mode):
    fn, a, b = _ops()[name]
    with torch_tpu.precision(mode):
        got = fn(a.to("tpu"), b.to("tpu")).cpu()
    e = math.log2(_err(got, a, b))
    lo, hi = LEVELS[mode]
    assert lo <= e <= hi, f"{name} {mode.name}: error 2^{e:.1f}, expected within [2^{lo}, 2^{hi}]"


def test_modes_are_ordered():
    fn, a, b = _ops()["mm"]
    errs = []
    for mode in Precision:
        with torch_tpu.precision(mode):
            errs.append(_err(fn(a.to("tpu"), b.to("tpu")).cpu(), a, b))
    assert errs[1] < errs[0] / 200 and errs[2] < errs[1] / 4, errs


def test_default_rounds_inputs_to_nearest_even_bit_for_bit():
    # Operands chosen so that rounding ties, carries and subnormals all occur; a 1-wide
    # contraction with an identity makes the product equal the rounded input exactly.
    bits = torch.tensor([0x3F808000, 0x3F818000, 0x3F80FFFF, 0x3F807FFF, 0x3F7FFFFF, 0xBF808001,
                         0x7F7FFFFF, 0x00000001, 0x00008000, 0x00018000, 0x80408000, 0x4B7FFF80,
                         0x7F800000, 0xFF800000], dtype=torch.int64)
    g = torch.Generator().manual_seed(1)
    rand = torch.randint(0, 2**31, (4096,), generator=g) | (torch.randint(0, 2, (4096,), generator=g) << 31)
    bits = torch.cat([bits, rand])
    bits = bits[((bits >> 23) & 0xFF) != 0xFF].to(torch.int32)  # finite values only
    x = bits.view(torch.float32).reshape(-1, 1)
    one = torch.ones(1, 1)
    with torch_tpu.precision(Precision.DEFAULT):
        got = torch.mm(x.to("tpu"), one.to("tpu")).cpu()
    # Reference RNE on the bit pattern: add 0x7FFF plus the lowest kept bit, truncate.
    u = bits.to(torch.int64) & 0xFFFFFFFF
    ref = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16 << 16) & 0xFFFFFFFF
    ref = torch.where(ref >= 2**31, ref - 2**32, ref).to(torch.int32).view(torch.float32).reshape(-1, 1)
    got = got + 0.0  # -0 products sum to +0 in the accumulator; compare zeros by value
    ref = ref + 0.0
    if torch_tpu._C._host_bf16_gemm():
        # A native bf16 GEMM treats subnormal bf16 operands as zero (as a TPU's matrix unit
        # does); the rounding itself happened in our packing, so compare the rest bit for bit.
        sub = (ref != 0) & (ref.abs() < torch.finfo(torch.float32).tiny)
        assert torch.all(got[sub] == 0)
        got, ref, x = got[~sub], ref[~sub], x[~sub]
    assert torch.equal(got.view(torch.int32), ref.view(torch.int32))
    assert torch.equal(got, x.bfloat16().float())  # PyTorch's own conversion is RNE too


@pytest.mark.parametrize("m,k,n,trans_a", [(1, 1024, 4096, False), (8, 1024, 4096, False), (13, 256, 1000, True),
                                             (16, 64, 300, False), (17, 256, 1000, False)])
def test_default_few_rows_rounds_each_operand(m, k, n, trans_a):
    # DEFAULT = exact products of bf16-rounded operands summed in f32, for decode's few-row
    # dots (a fused rounding pass) as for the rest (packed operands): within f32 summation
    # error of the f64 product of the rounded operands, and far from the unrounded product.
    g = torch.Generator().manual_seed(m * 7 + n)
    a = torch.randn(k, m, generator=g).t() if trans_a else torch.randn(m, k, generator=g)
    b = torch.randn(k, n, generator=g)
    if m > 1:  # NaN, Inf and a subnormal in the last row (rows of NaN/Inf results)
        a[m - 1, :3] = torch.tensor([float("nan"), float("inf"), 1e-40])
    b[5, :2] = torch.tensor([float("-inf"), 1e-39])
    want = a.bfloat16().double() @ b.bfloat16().double()
    with torch_tpu.precision(Precision.DEFAULT):
        got = (a.to("tpu") @ b.to("tpu")).cpu().double()
    finite = torch.isfinite(want)
    assert torch.equal(torch.isnan(got), torch.isnan(want)) and torch.equal(got[~finite & ~torch.isnan(want)], want[~finite & ~torch.isnan(want)])
    scale = a.abs().bfloat16().double() @ b.abs().bfloat16().double()
    err = ((got - want).abs() / scale.clamp_min(1e-30))[finite & torch.isfinite(scale)]
    assert err.max().item() < k * 2.0**-24, err.max().item()
    exact = a.double() @ b.double()
    assert ((got - exact).abs() / scale.clamp_min(1e-30))[finite & torch.isfinite(scale)].max().item() > 2.0**-12


@pytest.mark.parametrize("shape,k,n", [((1, 1024), 1024, 4096), ((1, 8, 1024), 1024, 4096), ((5, 3, 100), 100, 33),
                                         ((16, 7), 7, 1000), ((17, 64), 64, 50)])
@pytest.mark.parametrize("entry", ["linear", "matmul_t"])
def test_default_linear_decode_rounds_each_operand(shape, k, n, entry):
    # Decode through a projection stored [N, K] (F.linear, x @ W.t()): the few-row kernel reads
    # the weight as stored and rounds it in registers. Same contract as above, against float64
    # on the bf16-rounded operands; NaN / Inf / a subnormal in one weight row.
    g = torch.Generator().manual_seed(n + k)
    x = torch.randn(*shape, generator=g)
    w = torch.randn(n, k, generator=g)
    w[n - 1, :3] = torch.tensor([float("nan"), float("inf"), 1e-40])
    w[0, 1] = float("-inf")
    want = x.bfloat16().double() @ w.bfloat16().double().t()
    with torch_tpu.precision(Precision.DEFAULT):
        xt, wt = x.to("tpu"), w.to("tpu")
        got = (torch.nn.functional.linear(xt, wt) if entry == "linear" else xt @ wt.t()).cpu().double()
    assert got.shape == want.shape
    nan = torch.isnan(want)
    assert torch.equal(torch.isnan(got), nan)
    inf = torch.isinf(want)
    assert torch.equal(got[inf], want[inf])
    scale = x.abs().bfloat16().double() @ w.abs().bfloat16().double().t()
    ok = ~nan & ~inf & torch.isfinite(scale)
    err = ((got - want).abs() / scale.clamp_min(1e-30))[ok]
    assert err.max().item() < k * 2.0**-24, err.max().item()
    exact = x.double() @ w.double().t()
    assert ((got - exact).abs() / scale.clamp_min(1e-30))[ok].max().item() > 2.0**-12


def _hi_lo(x):
    hi = x.bfloat16().float()
    return hi.double(), (x - hi).bfloat16().double()


@pytest.mark.parametrize("m,k,n", [(1, 1024, 4096), (8, 1024, 512), (13, 256, 1000), (16, 64, 300), (17, 256, 100)])
@pytest.mark.parametrize("entry", ["matmul", "linear"])
def test_high_few_rows_is_bf16x3(m, k, n, entry):
    # HIGH = hi*hi + hi*lo + lo*hi (hi = bf16(x), lo = bf16(x - hi)) summed in f32, for decode's
    # few-row dots (split in registers, gemv.cpp) as for the rest (packed bf16x3 operands):
    # within f32 summation error of that sum in f64, and ~2^-16 from the exact product.
    g = torch.Generator().manual_seed(m * 31 + n)
    a = torch.randn(m, k, generator=g)
    w = torch.randn(n, k, generator=g) if entry == "linear" else torch.randn(k, n, generator=g)
    b = w.t() if entry == "linear" else w
    (ah, al), (bh, bl) = _hi_lo(a), _hi_lo(b)
    want = ah @ bh + ah @ bl + al @ bh
    with torch_tpu.precision(Precision.HIGH):
        at, wt = a.to("tpu"), w.to("tpu")
        got = (torch.nn.functional.linear(at, wt) if entry == "linear" else at @ wt).cpu().double()
    scale = a.abs().double() @ b.abs().double()
    err = ((got - want).abs() / scale).max().item()
    assert err < 2 * k * 2.0**-24, err
    exact = a.double() @ b.double()
    assert ((got - exact).abs() / scale).max().item() < 2.0**-15


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_inputs_ignore_the_mode(dtype):
    fn, a, b = _ops()["mm"]
    a, b = a.to(dtype), b.to(dtype)
    outs = []
    for mode in Precision:
        with torch_tpu.precision(mode):
            outs.append(fn(a.to("tpu"), b.to("tpu")).cpu())
    assert all(torch.equal(outs[0], o) for o in outs[1:])
    ref = (a.float() @ b.float()).to(dtype)
    assert torch.allclose(outs[0].float(), ref.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("name,mode", [("medium", Precision.DEFAULT), ("high", Precision.HIGH),
                                       ("highest", Precision.HIGHEST)])
def test_set_float32_matmul_precision_maps(name, mode):
    torch_tpu.set_matmul_precision(Precision.HIGH if mode is not Precision.HIGH else Precision.DEFAULT)
    torch.set_float32_matmul_precision(name)
    assert torch_tpu.get_matmul_precision() is mode
    assert torch.get_float32_matmul_precision() == name  # PyTorch's own setting still set


def test_set_float32_matmul_precision_changes_results():
    fn, a, b = _ops()["mm"]
    torch.set_float32_matmul_precision("highest")
    hst = fn(a.to("tpu"), b.to("tpu")).cpu()
    torch.set_float32_matmul_precision("medium")
    med = fn(a.to("tpu"), b.to("tpu")).cpu()
    assert _err(hst, a, b) < 2**-20.5 < 2**-12.5 < _err(med, a, b)
    assert torch.equal(a @ b, a @ b)  # CPU matmul still works under the wrapper


def test_set_float32_matmul_precision_rejects_bad_names():
    old = torch_tpu.get_matmul_precision()
    with pytest.warns(UserWarning):  # PyTorch warns and ignores an unknown name; so do we
        torch.set_float32_matmul_precision("fast")
    assert torch_tpu.get_matmul_precision() is old


def test_precision_context_restores():
    torch_tpu.set_matmul_precision("high")
    with torch.tpu.precision(Precision.HIGHEST):
        assert torch_tpu.get_matmul_precision() is Precision.HIGHEST
    assert torch_tpu.get_matmul_precision() is Precision.HIGH


def test_backends_tpu_allow_excess_precision():
    import torch.backends.tpu as bt

    assert bt is torch.backends.tpu
    assert torch.backends.tpu.allow_excess_precision is True
    torch.backends.tpu.allow_excess_precision = False
    try:
        assert torch.backends.tpu.allow_excess_precision is False
        assert "False" in repr(torch.backends.tpu)
        with pytest.raises(TypeError):
            torch.backends.tpu.allow_excess_precision = "yes"
    finally:
        torch.backends.tpu.allow_excess_precision = True
