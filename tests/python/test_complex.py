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
