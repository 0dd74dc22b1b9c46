"""torch.fft on tpu (torch_tpu/_internal/fft.py: DFT by matmul on real pairs) against PyTorch
CPU: fft/ifft/fftn/ifftn/rfft/irfft/rfftn/irfftn/hfft, every norm, odd and even lengths,
explicit n (padding/cropping), a transformed dim in the middle, forward and backward, in
strict and fused modes."""
import pytest
import torch

import torch_tpu

MODES = {"strict": torch_tpu.EagerMode.DEFER_NEVER, "fused": torch_tpu.EagerMode.DEFER_AND_FUSE}


def _x(*shape, complex_=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g)
    if complex_:
        x = torch.complex(x, torch.randn(*shape, generator=g))
    return x


CASES = [
    ("fft", lambda x: torch.fft.fft(x), True),
    ("fft real input", lambda x: torch.fft.fft(x), False),
    ("ifft ortho", lambda x: torch.fft.ifft(x, norm="ortho"), True),
    ("fft n=9 dim 1", lambda x: torch.fft.fft(x, n=9, dim=1), True),
    ("fftn", lambda x: torch.fft.fftn(x, dim=(1, 2)), True),
    ("fftn real (fnet)", lambda x: torch.fft.fftn(x, dim=(1, 2)).real, False),
    ("ifftn forward norm", lambda x: torch.fft.ifftn(x, norm="forward"), True),
    ("rfft", lambda x: torch.fft.rfft(x), False),
    ("rfft odd n", lambda x: torch.fft.rfft(x, n=7), False),
    ("irfft", lambda x: torch.fft.irfft(x), True),
    ("irfft n=9", lambda x: torch.fft.irfft(x, n=9), True),
    ("rfftn", lambda x: torch.fft.rfftn(x), False),
    ("irfftn", lambda x: torch.fft.irfftn(x, dim=(0, 2)), True),
    ("hfft", lambda x: torch.fft.hfft(x), True),
]


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("name,fn,cplx", CASES, ids=[c[0] for c in CASES])
def test_fft_matches_cpu(name, fn, cplx, mode):
    x = _x(2, 6, 5, complex_=cplx)
    want = fn(x)
    with torch_tpu.eager_mode(MODES[mode]):
        got = fn(x.to("tpu"))
        assert got.dtype == want.dtype and got.shape == want.shape
        torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name,fn,cplx", [CASES[5], CASES[7], CASES[9], CASES[4]], ids=["fftn-real", "rfft", "irfft", "fftn"])
def test_fft_gradients_match_cpu(name, fn, cplx):
    x = _x(2, 6, 5, complex_=cplx)
    grads = {}
    for dev in ("cpu", "tpu"):
        xx = x.clone().to(dev).requires_grad_()
        y = fn(xx)
        w = _x(*y.shape, complex_=y.is_complex(), seed=1).to(dev)
        (torch.view_as_real(y * w) if y.is_complex() else y * w).sum().backward()
        grads[dev] = xx.grad.cpu()
    torch.testing.assert_close(grads["tpu"], grads["cpu"], rtol=1e-4, atol=1e-4)
