"""Strided input views (a transposed weight, q / k / v views of one projection, expanded and
offset views) are bound as the flat run of storage they span and derived in the op's graph,
not gathered into a dense copy per call (exec::flat_run, Lower::in): values equal CPU's in
every mode, on the first call and on fast-path replays, with other offsets, with storages too
short for the run (bound as the view, as before), and for in-place writes into such views."""
import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu import EagerMode

MODES = [EagerMode.DEFER_NEVER, EagerMode.DEFER_AND_FUSE, EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING]
HIGHEST = torch_tpu.Precision.HIGHEST


def _close(got, want):
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_linear_reads_the_transposed_weight_in_place(mode):
    torch.manual_seed(0)
    w, b = torch.randn(48, 32), torch.randn(48)
    wt, bt = w.to("tpu"), b.to("tpu")
    with torch_tpu.eager_mode(mode), torch_tpu.precision(HIGHEST):
        for m in (8, 8, 3, 8):  # replays, another shape, the first again
            x = torch.randn(m, 32)
            _close(F.linear(x.to("tpu"), wt, bt), F.linear(x, w, b))
            _close(x.to("tpu") @ wt.t(), x @ w.t())
            _close(wt.t().sum(0), w.t().sum(0))


def test_fused_window_binds_the_weight_flat():
    w = torch.randn(48, 32, device="tpu")
    x = torch.randn(8, 32, device="tpu")
    with torch_tpu.eager_mode(EagerMode.DEFER_AND_FUSE), torch_tpu.precision(HIGHEST):
        y = x @ w.t()
        hlo = torch_tpu._C._pending_stablehlo(0, [y])
    sig = hlo.split("->")[0]
    assert "tensor<1536xf32>" in sig and "tensor<32x48xf32>" not in sig, sig
    torch.testing.assert_close(y.cpu(), x.cpu() @ w.cpu().t())


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_views_of_one_projection_with_offsets(mode):
    torch.manual_seed(1)
    with torch_tpu.eager_mode(mode):
        for _ in range(2):  # the second round replays
            qkv = torch.randn(2, 16, 3 * 64)
            d = qkv.to("tpu")
            q, k, v = (z.view(2, 16, 4, 16).transpose(1, 2) for z in d.split(64, dim=2))
            cq, ck, cv = (z.view(2, 16, 4, 16).transpose(1, 2) for z in qkv.split(64, dim=2))
            _close(q * k + v, cq * ck + cv)
            _close((k * 2).sum(-1), (ck * 2).sum(-1))
            _close(torch.exp(v[:, :, 3:]), torch.exp(cv[:, :, 3:]))


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_short_storage_and_expanded_views(mode):
    # The view's rows end before the storage would: bound as the view (a signature of its own).
    full = torch.randn(6144)
    size, stride = (2, 4, 16, 16), (3072, 16, 192, 1)
    with torch_tpu.eager_mode(mode):
        for n in (6144, 6016, 6144, 6016):
            c = full[:n].clone()
            t = c.to("tpu")
            _close(t.as_strided(size, stride, 0) * 3, c.as_strided(size, stride, 0) * 3)
        e = torch.randn(5, 1)
        _close(e.to("tpu").expand(5, 40) + torch.arange(40.0, device="tpu"), e.expand(5, 40) + torch.arange(40.0))


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_inplace_into_a_transposed_view(mode):
    torch.manual_seed(2)
    a = torch.randn(24, 40)
    with torch_tpu.eager_mode(mode):
        t = a.to("tpu")
        t.t().mul_(2).add_(torch.arange(24.0, device="tpu"))
        t[:, 8:].t()[3:].add_(1)
        want = a.clone()
        want.t().mul_(2).add_(torch.arange(24.0))
        want[:, 8:].t()[3:].add_(1)
        _close(t, want)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_attention_on_views_of_one_projection(mode):
    # q, k, v sliced from one projection (views with gaps): the attention op binds whole rows
    # of the projection (Lower::in_rows) and writes its output and gradients in the heads-inner
    # layout it computes; values and gradients equal CPU's, on a first and a second call.
    torch.manual_seed(3)
    for _ in range(2):
        x = torch.randn(2, 16, 3 * 32, requires_grad=True)
        xt = x.detach().to("tpu").requires_grad_()

        def attn(z):
            q, k, v = (t.view(2, 16, 4, 8).transpose(1, 2) for t in z.split(32, dim=2))
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

        want = attn(x)
        want.square().sum().backward()
        with torch_tpu.eager_mode(mode), torch_tpu.precision(HIGHEST):
            got = attn(xt)
            got.square().sum().backward()
        _close(got, want.detach())
        _close(xt.grad, x.grad)
