"""Convolution and pooling against PyTorch CPU, forward and backward: conv1d/2d/3d (stride,
padding incl. 'same'/'valid', dilation, groups, depthwise, bias), transposed convolutions
with output_padding, max/avg/adaptive pooling (ceil_mode, count_include_pad,
divisor_override), fp32 at HIGHEST (tight) and DEFAULT (bf16 operands), bf16, non-contiguous
inputs, batch 1 and empty batches, errors, and a small CNN trained for a few steps."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu  # noqa: F401
from op_harness import in_mode, modes

DEV = "tpu"
Precision = torch.tpu.Precision
precision = torch.tpu.precision
F32, BF16 = torch.float32, torch.bfloat16


def rand(shape, gen, dtype=F32):
    return (torch.rand(shape, generator=gen, dtype=torch.float64) * 4 - 2).to(dtype)


def tols(dtype, prec):
    if dtype == BF16:
        return dict(atol=3e-2, rtol=2e-2)
    if prec == Precision.HIGHEST:
        return dict(atol=2e-5, rtol=2e-5)
    return dict(atol=1e-1, rtol=3e-2)  # DEFAULT: bf16 operands


def compare(fn, inputs, dtype=F32, prec=Precision.HIGHEST, grad=True, view=None, seed=0, mode=None):
    """Runs fn on CPU (float32 reference for bf16 inputs) and on tpu (in eager `mode`, an
    op_harness.MODES key; None: the caller's); compares the outputs and, with grad, the input
    gradients for one random output gradient."""
    with in_mode(mode):
        return _compare(fn, inputs, dtype, prec, grad, view, seed)


def _compare(fn, inputs, dtype, prec, grad, view, seed):
    view = view or (lambda t: t)
    cpu = [x.detach().to(F32 if dtype == BF16 else dtype).requires_grad_(grad) for x in inputs]
    dev = [x.detach().to(dtype).to(DEV).requires_grad_(grad) for x in inputs]
    if dtype == BF16:  # the CPU reference sees the same (bf16-rounded) values
        cpu = [x.detach().to(BF16).to(F32).requires_grad_(grad) for x in inputs]
    out_c = fn(*[view(x) for x in cpu])
    with precision(prec):
        out_t = fn(*[view(x) for x in dev])
        outs_c = out_c if isinstance(out_c, tuple) else (out_c,)
        outs_t = out_t if isinstance(out_t, tuple) else (out_t,)
        for c, t in zip(outs_c, outs_t):
            assert t.device.type == DEV
            assert t.shape == c.shape
            if c.dtype.is_floating_point:
                torch.testing.assert_close(t.cpu().to(c.dtype), c, **tols(dtype, prec))
            else:
                torch.testing.assert_close(t.cpu(), c)
        if not grad:
            return out_t
        g = rand(outs_c[0].shape, torch.Generator().manual_seed(seed + 1))
        outs_c[0].backward(g)
        outs_t[0].backward(g.to(dtype).to(DEV))
    for c, t in zip(cpu, dev):
        assert (c.grad is None) == (t.grad is None)
        if c.grad is not None:
            tol = tols(dtype, prec)
            torch.testing.assert_close(t.grad.cpu().to(F32), c.grad.to(F32), atol=tol["atol"] * 4, rtol=tol["rtol"] * 2)
    return out_t


# (name, input shape, weight shape, kwargs)
CONV = [
    ("1d", (2, 3, 11), (4, 3, 3), dict()),
    ("1d_stride_pad_dil", (2, 4, 17), (6, 2, 3), dict(stride=2, padding=2, dilation=3, groups=2)),
    ("1d_same", (1, 3, 10), (2, 3, 4), dict(padding="same", dilation=2)),
    ("2d", (2, 3, 9, 8), (5, 3, 3, 3), dict(padding=1)),
    ("2d_stride", (2, 3, 10, 9), (4, 3, 3, 2), dict(stride=(2, 3), padding=(1, 0))),
    ("2d_stride_unreached_tail", (1, 2, 8, 8), (3, 2, 2, 2), dict(stride=3)),
    ("2d_dilation", (1, 2, 12, 11), (3, 2, 3, 3), dict(dilation=(2, 3), padding=(2, 1))),
    ("2d_groups", (2, 6, 7, 7), (9, 2, 3, 3), dict(groups=3, padding=1)),
    ("2d_depthwise", (2, 4, 8, 8), (8, 1, 3, 3), dict(groups=4, stride=2, padding=1)),
    ("2d_same", (1, 3, 9, 10), (4, 3, 4, 3), dict(padding="same")),
    ("2d_valid", (2, 3, 6, 6), (2, 3, 3, 3), dict(padding="valid")),
    ("2d_1x1_pad", (2, 3, 5, 5), (4, 3, 1, 1), dict(padding=1, stride=2)),
    ("2d_batch1", (1, 1, 5, 5), (1, 1, 5, 5), dict()),
    ("3d", (1, 2, 6, 5, 7), (3, 2, 2, 3, 3), dict(stride=(1, 2, 2), padding=(1, 1, 0))),
    ("3d_groups_dil", (2, 4, 5, 6, 5), (4, 2, 2, 2, 2), dict(groups=2, dilation=2, padding=1)),
]


@pytest.mark.parametrize("mode", modes())
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("name,xs,ws,kw", CONV, ids=[c[0] for c in CONV])
def test_conv_highest(name, xs, ws, kw, bias, mode):
    gen = torch.Generator().manual_seed(hash(name) % 1000)
    fn = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[len(xs)]
    inputs = [rand(xs, gen), rand(ws, gen)] + ([rand((ws[0],), gen)] if bias else [])
    compare(lambda x, w, *b: fn(x, w, *b, **kw), inputs, mode=mode)


@pytest.mark.parametrize("name,xs,ws,kw", CONV[::3], ids=[c[0] for c in CONV[::3]])
def test_conv_bf16(name, xs, ws, kw):
    gen = torch.Generator().manual_seed(7)
    fn = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[len(xs)]
    compare(lambda x, w, b: fn(x, w, b, **kw), [rand(xs, gen), rand(ws, gen), rand((ws[0],), gen)], dtype=BF16)


@pytest.mark.parametrize("name,xs,ws,kw", CONV[::2], ids=[c[0] for c in CONV[::2]])
def test_conv_default_rounds_operands_to_bf16(name, xs, ws, kw):
    """DEFAULT: exactly conv(bf16(x), bf16(w)) with f32 sums, so tight against CPU on rounded
    operands; the gradients are bf16-close to CPU fp32."""
    gen = torch.Generator().manual_seed(3)
    fn = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[len(xs)]
    x, w = rand(xs, gen), rand(ws, gen)
    r = lambda t: t.to(BF16).to(F32)  # noqa: E731
    want = fn(r(x), r(w), **kw)
    with precision(Precision.DEFAULT):
        got = fn(x.to(DEV), w.to(DEV), **kw).cpu()
    torch.testing.assert_close(got, want, atol=2e-5, rtol=2e-5)
    with precision(Precision.HIGHEST):
        exact = fn(x.to(DEV), w.to(DEV), **kw).cpu()
    assert not torch.equal(got, exact)
    compare(lambda a, b: fn(a, b, **kw), [x, w], prec=Precision.DEFAULT)


TRANSPOSED = [
    ("t1d", (2, 4, 7), (4, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ("t1d_groups_dil", (1, 4, 6), (4, 2, 3), dict(groups=2, dilation=2, stride=3, output_padding=2)),
    ("t2d", (2, 3, 5, 4), (3, 5, 3, 3), dict(stride=2, padding=1)),
    ("t2d_outpad", (1, 4, 4, 5), (4, 2, 3, 2), dict(stride=(2, 3), padding=(1, 0), output_padding=(1, 2))),
    ("t2d_groups", (2, 6, 4, 4), (6, 1, 2, 2), dict(groups=3, stride=2)),
    ("t2d_big_pad", (1, 2, 6, 6), (2, 2, 3, 3), dict(padding=2)),
    ("t3d", (1, 2, 3, 4, 3), (2, 3, 2, 3, 2), dict(stride=2, padding=(0, 1, 0), output_padding=(1, 0, 1))),
    # output_padding >= stride (allowed below the dilation): the input grad is cropped
    ("t2d_outpad_over_stride", (2, 2, 4, 4), (2, 2, 4, 5), dict(stride=(3, 2), padding=(1, 2), output_padding=(2, 3),
                                                              groups=2, dilation=(4, 4))),
]


@pytest.mark.parametrize("mode", modes())
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("name,xs,ws,kw", TRANSPOSED, ids=[c[0] for c in TRANSPOSED])
def test_conv_transpose_highest(name, xs, ws, kw, bias, mode):
    gen = torch.Generator().manual_seed(11)
    fn = {3: F.conv_transpose1d, 4: F.conv_transpose2d, 5: F.conv_transpose3d}[len(xs)]
    groups = kw.get("groups", 1)
    inputs = [rand(xs, gen), rand(ws, gen)] + ([rand((ws[1] * groups,), gen)] if bias else [])
    compare(lambda x, w, *b: fn(x, w, *b, **kw), inputs, mode=mode)


def test_conv_transpose_bf16():
    gen = torch.Generator().manual_seed(5)
    compare(lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1),
            [rand((2, 3, 4, 4), gen), rand((3, 2, 3, 3), gen)], dtype=BF16)


def test_conv_noncontiguous_inputs():
    gen = torch.Generator().manual_seed(9)
    x, w = rand((2, 8, 9, 6), gen), rand((4, 3, 3, 3), gen)
    # channels-last-like and step-sliced views of the input; a transposed weight view.
    compare(lambda a, b: F.conv2d(a.permute(0, 3, 1, 2)[:, 1::3], b.transpose(2, 3), padding=1),
            [x.permute(0, 2, 3, 1).contiguous(), w])
    compare(lambda a, b: F.conv2d(a[:, 1:4].contiguous(memory_format=torch.channels_last), b, stride=2), [x, w])
    compare(lambda a, b: F.conv_transpose2d(a[:, ::2, 1:], b.transpose(0, 1), stride=2), [x, rand((3, 4, 2, 2), gen)])


def test_conv_empty_batch_and_channels():
    gen = torch.Generator().manual_seed(2)
    compare(lambda x, w, b: F.conv2d(x, w, b, padding=1), [rand((0, 3, 5, 5), gen), rand((2, 3, 3, 3), gen), rand((2,), gen)])
    compare(lambda x, w: F.conv_transpose2d(x, w, stride=2), [rand((0, 3, 4, 4), gen), rand((3, 2, 3, 3), gen)])


def test_conv_modules_padding_modes():
    torch.manual_seed(0)
    for mode in ("zeros", "reflect", "replicate", "circular"):
        m = nn.Conv2d(3, 4, 3, padding=1, padding_mode=mode)
        x = torch.randn(2, 3, 6, 7)
        md = nn.Conv2d(3, 4, 3, padding=1, padding_mode=mode).to(DEV)
        md.load_state_dict(m.state_dict())
        with precision(Precision.HIGHEST):
            torch.testing.assert_close(md(x.to(DEV)).cpu(), m(x), atol=2e-5, rtol=2e-5)


def test_conv_backward_output_mask():
    """Only the gradients autograd needs are computed (undefined otherwise)."""
    gen = torch.Generator().manual_seed(4)
    x, w = rand((2, 3, 6, 6), gen).to(DEV), rand((4, 3, 3, 3), gen).to(DEV)
    w.requires_grad_(True)
    F.conv2d(x, w, padding=1).sum().backward()
    assert x.grad is None and w.grad is not None
    gi, gw, gb = torch.ops.aten.convolution_backward_overrideable(
        torch.ones(2, 4, 6, 6, device=DEV), x, w, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, False, True])
    assert gi.shape == x.shape and gw is None and gb.shape == (4,)
    torch.testing.assert_close(gb.cpu(), torch.full((4,), 72.0))


@pytest.mark.parametrize("fn,xs,ws,kw", [
    (F.conv2d, (2, 3, 5, 5), (4, 2, 3, 3), {}),                 # channel mismatch
    (F.conv2d, (2, 4, 5, 5), (4, 2, 3, 3), dict(groups=3)),      # groups do not divide
    (F.conv2d, (2, 3, 2, 2), (4, 3, 3, 3), {}),                 # kernel larger than input
    (F.conv1d, (2, 3, 5), (4, 3, 3, 3), {}),                    # rank mismatch
    (F.conv2d, (2, 3, 5, 5), (4, 3, 3, 3), dict(stride=0)),      # bad stride
])
def test_conv_errors_match_cpu(fn, xs, ws, kw):
    x, w = torch.randn(xs), torch.randn(ws)
    with pytest.raises(RuntimeError):
        fn(x, w, **kw)
    with pytest.raises(RuntimeError):
        fn(x.to(DEV), w.to(DEV), **kw).cpu()


def test_conv_and_pool_integers_exact():
    gen = torch.Generator().manual_seed(6)
    x = torch.randint(-5, 6, (2, 4, 7, 6), generator=gen)
    w = torch.randint(-3, 4, (6, 2, 3, 2), generator=gen)
    b = torch.randint(-3, 4, (6,), generator=gen)
    want = F.conv2d(x, w, b, stride=(2, 1), padding=1, groups=2)
    assert torch.equal(F.conv2d(x.to(DEV), w.to(DEV), b.to(DEV), stride=(2, 1), padding=1, groups=2).cpu(), want)
    wt = torch.randint(-3, 4, (4, 3, 2, 2), generator=gen)
    assert torch.equal(F.conv_transpose2d(x.to(DEV), wt.to(DEV), stride=2).cpu(), F.conv_transpose2d(x, wt, stride=2))
    for dt in (torch.int64, torch.int32, torch.uint8):
        xi = x.abs().to(dt) if dt == torch.uint8 else x.to(dt)
        v, i = F.max_pool2d(xi, 3, 2, 1, return_indices=True)
        vt, it = F.max_pool2d(xi.to(DEV), 3, 2, 1, return_indices=True)
        assert torch.equal(vt.cpu(), v) and torch.equal(it.cpu(), i)


def test_conv_bool_input_raises():
    x, w = torch.ones(1, 1, 3, 3, dtype=torch.bool), torch.ones(1, 1, 1, 1, dtype=torch.bool)
    with pytest.raises((RuntimeError, NotImplementedError)):
        F.conv2d(x.to(DEV), w.to(DEV)).cpu()


# ---- pooling --------------------------------------------------------------------------------

POOL = [
    ("max1d", lambda x: F.max_pool1d(x, 3, 2, 1), (2, 3, 11)),
    ("max1d_indices", lambda x: F.max_pool1d(x, 2, return_indices=True), (2, 3, 9)),
    ("max2d", lambda x: F.max_pool2d(x, 3, 2, 1), (2, 3, 9, 8)),
    ("max2d_indices", lambda x: F.max_pool2d(x, (2, 3), (2, 1), return_indices=True), (2, 2, 7, 8)),
    ("max2d_ceil_dil", lambda x: F.max_pool2d(x, 3, 2, 1, dilation=2, ceil_mode=True, return_indices=True), (1, 2, 10, 9)),
    ("max2d_unbatched", lambda x: F.max_pool2d(x, 2, return_indices=True), (3, 6, 5)),
    ("max3d", lambda x: F.max_pool3d(x, 2, 2, 1, return_indices=True), (1, 2, 5, 6, 5)),
    ("max3d_ceil", lambda x: F.max_pool3d(x, (2, 3, 2), (2, 2, 1), ceil_mode=True), (2, 1, 5, 7, 4)),
    ("avg1d", lambda x: F.avg_pool1d(x, 3, 2, 1), (2, 3, 10)),
    ("avg2d", lambda x: F.avg_pool2d(x, 3, 2, 1), (2, 3, 9, 8)),
    ("avg2d_ceil_nopad", lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), (2, 3, 8, 9)),
    ("avg2d_ceil_pad", lambda x: F.avg_pool2d(x, (3, 2), (2, 2), (1, 1), ceil_mode=True), (1, 2, 8, 7)),
    ("avg2d_divisor", lambda x: F.avg_pool2d(x, 2, 1, 1, divisor_override=3), (2, 2, 5, 6)),
    ("avg2d_unreached_tail", lambda x: F.avg_pool2d(x, 2, 3), (1, 2, 8, 7)),
    ("avg3d", lambda x: F.avg_pool3d(x, 2, 2, 1, count_include_pad=False), (1, 2, 5, 6, 4)),
    ("avg3d_ceil_div", lambda x: F.avg_pool3d(x, (3, 2, 2), 2, ceil_mode=True, divisor_override=5), (2, 1, 6, 5, 5)),
    ("adaptive_avg1d", lambda x: F.adaptive_avg_pool1d(x, 4), (2, 3, 10)),
    ("adaptive_avg2d", lambda x: F.adaptive_avg_pool2d(x, (3, 4)), (2, 3, 7, 9)),
    ("adaptive_avg2d_1x1", lambda x: F.adaptive_avg_pool2d(x, 1), (2, 3, 5, 5)),
    ("adaptive_avg2d_up", lambda x: F.adaptive_avg_pool2d(x, (7, 5)), (1, 2, 4, 3)),
    ("adaptive_avg3d", lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)), (1, 2, 5, 7, 4)),
    ("adaptive_max1d", lambda x: F.adaptive_max_pool1d(x, 4, return_indices=True), (2, 3, 10)),
    ("adaptive_max2d", lambda x: F.adaptive_max_pool2d(x, (3, 4), return_indices=True), (2, 3, 7, 9)),
    ("adaptive_max2d_up", lambda x: F.adaptive_max_pool2d(x, (5, 4)), (1, 2, 3, 3)),
    ("adaptive_max3d", lambda x: F.adaptive_max_pool3d(x, (2, 3, 2), return_indices=True), (1, 2, 5, 7, 4)),
]


@pytest.mark.parametrize("mode", modes())
@pytest.mark.parametrize("dtype", [F32, BF16], ids=["f32", "bf16"])
@pytest.mark.parametrize("name,fn,xs", POOL, ids=[p[0] for p in POOL])
def test_pool(name, fn, xs, dtype, mode):
    gen = torch.Generator().manual_seed(len(name))
    x = rand(xs, gen)
    if "max" in name:  # distinct values: the argmax is unique, so indices and grads are exact
        x = (torch.randperm(x.numel(), generator=gen).reshape(xs).to(torch.float64) / 8).to(F32)
    compare(fn, [x], dtype=dtype, mode=mode)


def test_pool_noncontiguous_and_empty_batch():
    gen = torch.Generator().manual_seed(1)
    x = rand((3, 2, 8, 9), gen)
    compare(lambda a: F.max_pool2d(a.transpose(2, 3), 2, return_indices=True), [x])
    compare(lambda a: F.avg_pool2d(a[:, :, ::2], 2, 1, 1), [x])
    compare(lambda a: F.max_pool2d(a, 2), [rand((0, 2, 4, 4), gen)])
    compare(lambda a: F.avg_pool2d(a, 2), [rand((0, 2, 4, 4), gen)])
    compare(lambda a: F.adaptive_avg_pool2d(a, 2), [rand((0, 2, 4, 4), gen)])


def test_max_pool_ties_nan_and_inf():
    # Ties: the first maximum in window order wins; NaN wins; all -inf keeps the first position.
    x = torch.tensor([[[[1.0, 1.0, 2.0, 2.0], [1.0, 0.0, 2.0, float("nan")],
                        [-float("inf"), -float("inf"), 3.0, 3.0], [-float("inf"), -float("inf"), 3.0, 1.0]]]])
    v, i = F.max_pool2d(x, 2, return_indices=True)
    vt, it = F.max_pool2d(x.to(DEV), 2, return_indices=True)
    torch.testing.assert_close(vt.cpu(), v, equal_nan=True)
    assert torch.equal(it.cpu(), i)


@pytest.mark.parametrize("fn,xs", [
    (lambda x: F.max_pool2d(x, 3, padding=2), (1, 1, 5, 5)),      # pad > kernel / 2
    (lambda x: F.max_pool2d(x, 4), (1, 1, 3, 3)),                 # output too small
    (lambda x: F.avg_pool2d(x, 2, 0), (1, 1, 4, 4)),              # zero stride
    (lambda x: F.avg_pool2d(x, 2, divisor_override=0), (1, 1, 4, 4)),
    (lambda x: F.max_pool3d(x, 2), (2, 2)),                       # bad rank
])
def test_pool_errors_match_cpu(fn, xs):
    x = torch.randn(xs)
    with pytest.raises(RuntimeError):
        fn(x)
    with pytest.raises(RuntimeError):
        fn(x.to(DEV)).cpu()


# ---- a small CNN trains the same on tpu and CPU at HIGHEST ---------------------------------

class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2), nn.BatchNorm2d(16), nn.ReLU(),
            nn.AdaptiveAvgPool2d((2, 2)))
        self.head = nn.Linear(64, 5)

    def forward(self, x):
        return self.head(self.body(x).flatten(1))


def test_small_cnn_trains_like_cpu():
    torch.manual_seed(0)
    cpu = SmallCNN()
    dev = SmallCNN().to(DEV)
    dev.load_state_dict(cpu.state_dict())
    opt_c = torch.optim.SGD(cpu.parameters(), lr=0.1, momentum=0.9)
    opt_d = torch.optim.SGD(dev.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(1)
    with precision(Precision.HIGHEST):
        for step in range(4):
            x = torch.randn(6, 3, 16, 16, generator=gen)
            y = torch.randint(0, 5, (6,), generator=gen)
            loss_c = F.cross_entropy(cpu(x), y)
            loss_d = F.cross_entropy(dev(x.to(DEV)), y.to(DEV))
            opt_c.zero_grad()
            opt_d.zero_grad()
            loss_c.backward()
            loss_d.backward()
            opt_c.step()
            opt_d.step()
            torch.testing.assert_close(loss_d.cpu(), loss_c, atol=1e-4, rtol=1e-4)
    for (n, pc), pd in zip(cpu.state_dict().items(), dev.state_dict().values()):
        torch.testing.assert_close(pd.cpu(), pc, atol=2e-4, rtol=2e-4, msg=lambda m: f"{n}: {m}")
