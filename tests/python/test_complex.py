"""complex64/complex128 tensors on tpu as pairs of reals (csrc/lowering/from_aten/complex.cpp):
transfers, view_as_real/view_as_complex, polar, mul/add/sub (complex, real and scalar
operands, broadcasting), neg, conj, clone, sum, fill_/zero_, and the rotary-embedding pattern
of DeepSeek-V2 / Llama 4 forward and backward, against PyTorch CPU in strict and fused modes;
other ops on complex tensors raise NotImplementedError naming the op."""
import pytest
import torch

import torch_tpu

MODES = {"strict": torch_tpu.EagerMode.DEFER_NEVER, "fused": torch_tpu.EagerMode.DEFER_AND_FUSE}


def _c(*shape, seed=0, dtype=torch.complex64):
    g = torch.Generator().manual_seed(seed)
    real = torch.float32 if dtype == torch.complex64 else torch.float64
    return torch.complex(torch.randn(*shape, generator=g, dtype=real), torch.randn(*shape, generator=g, dtype=real))


CASES = [
    ("roundtrip", lambda a, b, d: a),
    ("mul", lambda a, b, d: a * b),
    ("mul broadcast", lambda a, b, d: a * b[0]),
    ("mul real tensor", lambda a, b, d: a * torch.arange(4.0, device=d)),
    ("mul scalar", lambda a, b, d: a * 2.5),
    ("mul complex scalar", lambda a, b, d: a * (1 - 2j)),
    ("add", lambda a, b, d: a + b),
    ("sub alpha", lambda a, b, d: torch.sub(a, b, alpha=3)),
    ("neg", lambda a, b, d: -a),
    ("conj", lambda a, b, d: a.conj().resolve_conj()),
    ("mul conj", lambda a, b, d: a * b.conj()),
    ("clone of view", lambda a, b, d: a.t().clone()),
    ("sum", lambda a, b, d: a.sum()),
    ("sum dim", lambda a, b, d: a.sum(0, keepdim=True)),
    ("sum dtype complex128", lambda a, b, d: a.sum(dtype=torch.complex128)),
    ("sum dim dtype complex64", lambda a, b, d: a.sum(1, dtype=torch.complex64)),
    ("sum dtype float32 (real parts)", lambda a, b, d: a.sum(dtype=torch.float32)),
    ("view_as_real", lambda a, b, d: torch.view_as_real(a) * 2),
    ("in-place mul", lambda a, b, d: a.clone().mul_(b)),
    ("zero_", lambda a, b, d: a.clone().zero_()),
    ("fill_", lambda a, b, d: a.clone().fill_(2 - 1j)),
    ("polar", lambda a, b, d: torch.polar(a.real.abs().contiguous(), a.imag.contiguous())),
    ("real into complex", lambda a, b, d: torch.zeros(3, 4, dtype=torch.complex64, device=d).copy_(a.real)),
]


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
def test_complex_ops_match_cpu(name, fn, dtype, mode):
    a, b = _c(3, 4, dtype=dtype), _c(3, 4, seed=1, dtype=dtype)
    want = fn(a, b, "cpu")
    with torch_tpu.eager_mode(MODES[mode]):
        got = fn(a.to("tpu"), b.to("tpu"), "tpu")
        assert got.dtype == want.dtype
        torch.testing.assert_close(got.cpu(), want)


def _rope(x, freqs):  # transformers' DeepSeek-V2 apply_rotary_emb
    cis = torch.polar(torch.ones_like(freqs), freqs)
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * cis).flatten(3).type_as(x)


@pytest.mark.parametrize("mode", list(MODES))
def test_rotary_embedding_forward_and_backward(mode):
    g = torch.Generator().manual_seed(0)
    x, f, w = torch.randn(2, 3, 5, 8, generator=g), torch.randn(5, 4, generator=g), torch.randn(2, 3, 5, 8, generator=g)
    out = {}
    for dev in ("cpu", "tpu"):
        xx = x.clone().to(dev).requires_grad_()
        with torch_tpu.eager_mode(MODES[mode]):
            y = _rope(xx, f.to(dev))
            (y * w.to(dev)).sum().backward()
            out[dev] = (y.detach().cpu(), xx.grad.cpu())
    torch.testing.assert_close(out["tpu"][0], out["cpu"][0])
    torch.testing.assert_close(out["tpu"][1], out["cpu"][1])


def test_unsupported_complex_op_names_it():
    a = _c(3, 4).to("tpu")
    with pytest.raises(NotImplementedError, match=r"aten::exp"):
        torch.exp(a)
    # the device keeps working
    assert (torch.ones(2, device="tpu") + 1).cpu().tolist() == [2.0, 2.0]


def test_fft_runs_under_cpu_fallback():
    # No FFT lowering yet: with the CPU fallback on, complex results travel both ways.
    x = torch.randn(8, generator=torch.Generator().manual_seed(0))
    with torch_tpu.cpu_fallback_mode(True):
        y = torch.fft.fft(x.to("tpu"))
        z = torch.fft.ifft(y).real
    assert y.device.type == "tpu" and y.dtype == torch.complex64
    torch.testing.assert_close(y.cpu(), torch.fft.fft(x))
    torch.testing.assert_close(z.cpu(), x)


def _i(*vals):
    return torch.tensor(vals)


SHAPE_CASES = [  # the index / gather / scatter / cat families on complex tensors (complex_shape.cpp)
    ("index_select", lambda a, b, d: a.index_select(1, _i(3, 0, 3).to(d))),
    ("index_select neg dim", lambda a, b, d: a.index_select(-2, _i(2, 0).to(d))),
    ("index by positions", lambda a, b, d: a[_i(2, 1, 1).to(d)]),
    ("index 2-d", lambda a, b, d: a[_i(0, 2).to(d), _i(3, 1).to(d)]),
    ("index bool mask", lambda a, b, d: a[:, _i(True, False, True, False).to(d)]),
    ("gather", lambda a, b, d: a.gather(1, _i(0, 3, 3, 1, 2, 2).view(3, 2).to(d))),
    ("gather neg dim", lambda a, b, d: a.gather(-1, _i(1, 1, 0).view(3, 1).to(d))),
    ("cat", lambda a, b, d: torch.cat([a, b], 0)),
    ("cat neg dim with real", lambda a, b, d: torch.cat([a, b.real.contiguous()], -1)),
    ("stack", lambda a, b, d: torch.stack([a, b], 1)),
    ("stack neg dim", lambda a, b, d: torch.stack([a, b], -1)),
    ("where", lambda a, b, d: torch.where(a.real > 0, a, b)),
    ("masked_fill", lambda a, b, d: a.masked_fill(b.real > 0, 1 + 2j)),
    ("scatter", lambda a, b, d: a.scatter(1, _i(0, 2, 1, 3, 3, 0).view(3, 2).to(d), b)),
    ("scatter_add", lambda a, b, d: a.scatter_add(0, _i(0, 0, 2, 1, 1, 1, 0, 2).view(2, 4).to(d), b)),
    ("index_put accumulate", lambda a, b, d: a.index_put((_i(0, 0, 2).to(d),), b[:3, :].narrow(0, 0, 3), True)),
    ("index_add", lambda a, b, d: a.index_add(1, _i(1, 1, 0, 3).to(d), b)),
    ("index_put_ in place", lambda a, b, d: a.clone().index_put_((_i(1).to(d),), b[0])),
    ("flip", lambda a, b, d: a.flip(-1)),
    ("roll", lambda a, b, d: a.roll(1, 0)),
    ("roll flat", lambda a, b, d: a.roll(5)),
    ("repeat", lambda a, b, d: a.repeat(2, 1)),
    ("pad", lambda a, b, d: torch.nn.functional.pad(a, (1, 2))),
    ("slice_scatter", lambda a, b, d: a.slice_scatter(b[:, :2], 1, 1, 3)),
    ("select_scatter", lambda a, b, d: a.select_scatter(b[1], 0, 2)),
    ("div", lambda a, b, d: a / b),
    ("div real", lambda a, b, d: a / (b.real.abs() + 1)),
    ("div scalar", lambda a, b, d: a / 4.0),
    ("abs", lambda a, b, d: a.abs()),
    ("angle", lambda a, b, d: a.angle()),
    ("reshape of transpose", lambda a, b, d: a.t().reshape(2, 6)),
    ("chunk cat", lambda a, b, d: torch.cat(a.chunk(2, 1)[::-1], 1)),
]


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("name,fn", SHAPE_CASES, ids=[c[0] for c in SHAPE_CASES])
def test_complex_index_and_shape_ops_match_cpu(name, fn, mode):
    a, b = _c(3, 4), _c(3, 4, seed=1)
    want = fn(a, b, "cpu")
    with torch_tpu.eager_mode(MODES[mode]):
        got = fn(a.to("tpu"), b.to("tpu"), "tpu")
        assert got.dtype == want.dtype and got.shape == want.shape
        torch.testing.assert_close(got.cpu(), want)


class _ComplexRoPE(torch.nn.Module):
    """TorchTitan's rotary embedding: complex freqs_cis precomputed, gathered by position."""

    def __init__(self, dim, max_len):
        super().__init__()
        freqs = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        t = torch.arange(max_len).float()
        self.register_buffer("freqs_cis", torch.polar(torch.ones(max_len, dim // 2), torch.outer(t, freqs)))

    def forward(self, xq, xk, positions):
        cis = self.freqs_cis[positions]  # [B, T, D/2], a gather of a complex tensor
        cis = cis.view(cis.shape[0], cis.shape[1], 1, cis.shape[-1])
        q = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        k = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
        oq = torch.view_as_real(q * cis).flatten(3)
        ok = torch.view_as_real(k * cis).flatten(3)
        return oq.type_as(xq), ok.type_as(xk)


@pytest.mark.parametrize("mode", ["strict", "fused", "compile"])
def test_complex_rope_gather_forward_and_backward(mode):
    g = torch.Generator().manual_seed(0)
    B, T, H, D = 2, 6, 2, 8
    xq, xk = torch.randn(B, T, H, D, generator=g), torch.randn(B, T, H, D, generator=g)
    pos = torch.tensor([[0, 1, 2, 3, 4, 5], [3, 3, 7, 1, 0, 9]])
    w = torch.randn(B, T, H, D, generator=g)
    out = {}
    from torch_tpu._internal import compile as tpu_compile

    before = tpu_compile.stats()
    for dev in ("cpu", "tpu"):
        m = _ComplexRoPE(D, 16).to(dev)
        q, k = xq.clone().to(dev).requires_grad_(), xk.clone().to(dev).requires_grad_()
        fn = torch.compile(m, backend="tpu") if (mode == "compile" and dev == "tpu") else m
        with torch_tpu.eager_mode(MODES.get(mode, torch_tpu.EagerMode.DEFER_NEVER)):
            oq, ok = fn(q, k, pos.to(dev))
            ((oq + 2 * ok) * w.to(dev)).sum().backward()
            out[dev] = [t.detach().cpu() for t in (oq, ok, q.grad, k.grad)]
    for got, want in zip(out["tpu"], out["cpu"]):
        torch.testing.assert_close(got, want)
    if mode == "compile":  # captured into programs (complex inputs read through their real pairs), not run eagerly
        after = tpu_compile.stats()
        assert after["captures"] >= before["captures"] + 2 and after["eager_calls"] == before["eager_calls"], (before, after)


def test_gradient_through_gathered_complex_parameter():
    """A complex leaf gathered by index and by index_select: its gradient (index_put /
    index_add of complex values into zeros) as on CPU."""
    g = torch.Generator().manual_seed(2)
    base = _c(5, 3, seed=3)
    w = _c(4, 3, seed=4)
    idx = torch.tensor([4, 0, 4, 2])
    grads = {}
    for dev in ("cpu", "tpu"):
        p = base.clone().to(dev).requires_grad_()
        y = p[idx.to(dev)] * w.to(dev) + p.index_select(0, idx.flip(0).to(dev))
        torch.view_as_real(torch.cat([y, p], 0)).square().sum().backward()
        grads[dev] = p.grad.cpu()
    torch.testing.assert_close(grads["tpu"], grads["cpu"])
    del g
