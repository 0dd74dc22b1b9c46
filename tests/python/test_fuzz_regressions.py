"""Bugs the fuzzer found (make fuzz, seed 1, session 10), each compared with PyTorch CPU. Every
test here failed before its fix."""
import pytest
import torch

import torch_tpu  # noqa: F401


def close(got, want, **kw):
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, **kw)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_vector_norm_large_ord_over_one_element(dtype):
    # |x|^100 overflows; the norm of one element is |x| (CPU's answer), not inf.
    x = torch.tensor([[4.625, -6.5], [0.5, 2.0]], dtype=dtype).reshape(2, 2, 1)
    for dim in (2, (1, 2)):
        want = torch.linalg.vector_norm(x[:, :1], 100, dim=dim, keepdim=True)
        got = torch.linalg.vector_norm(x[:, :1].to("tpu"), 100, dim=dim, keepdim=True)
        close(got, want)
        assert torch.isfinite(got.cpu()).all()


def test_addcdiv_addcmul_overflow_order():
    # CPU computes self + (value * t1) / t2: value * t1 overflows to -inf in float32.
    s = torch.tensor([2.5, 1.0])
    t1 = torch.tensor([3.0e38, 1.0])
    t2 = torch.tensor([2.75, 4.0])
    want = torch.addcdiv(s, t1, t2, value=-1.5)
    assert torch.isinf(want[0])
    close(torch.addcdiv(s.to("tpu"), t1.to("tpu"), t2.to("tpu"), value=-1.5), want)
    t2 = torch.tensor([1.0e-3, 4.0])
    want = torch.addcmul(s, t1, t2, value=-1.5)
    close(torch.addcmul(s.to("tpu"), t1.to("tpu"), t2.to("tpu"), value=-1.5), want)


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
def test_conv_transpose_nonfinite_weight_skips_dilation_holes(bad):
    # A transposed conv is a conv of the stride-dilated input: the holes are not input, so an
    # inf/nan weight reaches only outputs its real taps touch (the rest are the bias).
    torch.manual_seed(0)
    x = torch.randn(1, 2, 4, 5)
    w = torch.randn(2, 3, 3, 2)
    w[0, 1, 1, 0] = bad
    b = torch.randn(3)
    kw = dict(stride=2, padding=1, output_padding=1)
    want = torch.nn.functional.conv_transpose2d(x, w, b, **kw)
    assert torch.isfinite(want).any() and not torch.isfinite(want).all()
    with torch.tpu.precision(torch.tpu.Precision.HIGHEST):
        got = torch.nn.functional.conv_transpose2d(x.to("tpu"), w.to("tpu"), b.to("tpu"), **kw)
    close(got, want, atol=1e-4, rtol=1e-4)
    got = torch.nn.functional.conv_transpose2d(x.to("tpu"), w.to("tpu"), b.to("tpu"), **kw)  # DEFAULT
    assert torch.equal(torch.isfinite(got.cpu()), torch.isfinite(want))


def test_conv_transpose3d_dilated_inf_weight():
    torch.manual_seed(1)
    x = torch.randn(1, 1, 4, 5, 2)
    w = torch.randn(1, 1, 4, 3, 1)
    w[0, 0, 2, 1, 0] = float("-inf")
    b = torch.randn(1)
    kw = dict(stride=2, padding=1, output_padding=1, dilation=(2, 3, 2))
    want = torch.nn.functional.conv_transpose3d(x, w, b, **kw)
    with torch.tpu.precision(torch.tpu.Precision.HIGHEST):
        got = torch.nn.functional.conv_transpose3d(x.to("tpu"), w.to("tpu"), b.to("tpu"), **kw)
    close(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("grad_dt,mask_dt", [(torch.uint8, torch.bfloat16), (torch.bool, torch.bfloat16),
                                             (torch.float16, torch.bool), (torch.int32, torch.bool)])
def test_native_dropout_backward_dtype(grad_dt, mask_dt):
    g = torch.tensor([1, 0, 1, 1, 0]).to(grad_dt)
    m = torch.tensor([1.0, 1.0, 0.0, 0.5, 1.0]).to(mask_dt)
    want = torch.ops.aten.native_dropout_backward(g, m, 2.0)
    got = torch.ops.aten.native_dropout_backward(g.to("tpu"), m.to("tpu"), 2.0)
    assert got.dtype == want.dtype
    close(got, want)


def test_layer_norm_param_shape_checked():
    x = torch.randn(1, 2)
    for w, b in ((torch.ones(2), torch.zeros(1)), (torch.ones(1), None)):
        with pytest.raises(RuntimeError, match="same shape as normalized_shape"):
            torch.nn.functional.layer_norm(x, (2,), w, b)
        with pytest.raises(RuntimeError, match="same shape as normalized_shape"):
            torch.nn.functional.layer_norm(x.to("tpu"), (2,), w.to("tpu"), None if b is None else b.to("tpu"))


def test_max_pool_unbatched_empty_channels_rejected():
    x = torch.zeros(0, 6, 6, dtype=torch.uint8)
    with pytest.raises(RuntimeError):
        torch.nn.functional.max_pool2d(x, 3)
    with pytest.raises(RuntimeError, match="non-zero size"):
        torch.nn.functional.max_pool2d(x.to("tpu"), 3)
    # a zero batch of a batched input stays fine, as on CPU
    e = torch.nn.functional.max_pool2d(torch.zeros(0, 2, 6, 6).to("tpu"), 3)
    assert e.shape == (0, 2, 2, 2)
