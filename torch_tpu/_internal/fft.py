"""torch.fft on tpu: the three ATen FFT primitives (`_fft_c2c`, `_fft_r2c`, `_fft_c2r`) as
discrete Fourier transforms by matmul, one transformed dim at a time, on the (re, im) pairs
complex tpu tensors are stored as (csrc/lowering/from_aten/complex.cpp).

A length-n DFT is a matmul with the n x n matrix exp(-+2 pi i jk / n) (cos and sin tables
built in float64 on the host, then cast to the input's real dtype): O(n^2) per transformed
dim instead of FFT's O(n log n), at HIGHEST matmul precision (float32 rounding, as an FFT;
the session's precision setting is for matmuls the user writes), and the same program on the host
and on pjrt (the IR has no FFT op yet). Lengths above MAX_N raise NotImplementedError.
Normalization follows ATen's codes: 0 none, 1 1/sqrt(n) ("ortho"), 2 1/n."""
import functools
import math

import torch

from torch_tpu._internal.precision import Precision, precision

aten = torch.ops.aten
MAX_N = 8192


def _check_len(n):
    if n > MAX_N:
        raise NotImplementedError(f"[aten::_fft] transforms longer than {MAX_N} are not supported on tpu "
                                  f"(DFT by matmul); got length {n}")


def _tables(n, m, sign, dtype, device):
    """cos and sign*sin of 2 pi j k / n for j < n (input index), k < m (output index)."""
    _check_len(max(n, m))
    j = torch.arange(n, dtype=torch.float64)[:, None]
    k = torch.arange(m, dtype=torch.float64)[None, :]
    ang = (2 * math.pi / n) * torch.remainder(j * k, n)
    return torch.cos(ang).to(dtype).to(device), (sign * torch.sin(ang)).to(dtype).to(device)


def _scale(n, normalization):
    return {0: 1.0, 1: 1.0 / math.sqrt(n), 2: 1.0 / n}[normalization]


def _dft(re, im, d, sign, scale, m=None):
    """The DFT along dim d of re + i im (im may be None): (re', im'), m outputs (default n)."""
    n = re.shape[d]
    m = n if m is None else m
    c, s = _tables(n, m, sign, re.dtype, re.device)
    r = re.movedim(d, -1)
    out_re = r @ c
    out_im = r @ s
    if im is not None:
        i = im.movedim(d, -1)
        out_re = out_re - i @ s
        out_im = out_im + i @ c
    if scale != 1.0:
        out_re, out_im = out_re * scale, out_im * scale
    return out_re.movedim(-1, d), out_im.movedim(-1, d)


def _pairs(x):
    p = torch.view_as_real(x.resolve_conj())
    return p[..., 0], p[..., 1]


def _complex(re, im):
    return torch.view_as_complex(torch.stack([re, im], -1).contiguous())


def _dims(x, dim):
    return [d % x.dim() for d in dim]


def fft_c2c(self, dim, normalization, forward):
    re, im = _pairs(self)
    sign = -1.0 if forward else 1.0
    dims = _dims(self, dim)
    n = math.prod(self.shape[d] for d in dims)
    for i, d in enumerate(dims):
        re, im = _dft(re, im, d, sign, _scale(n, normalization) if i == len(dims) - 1 else 1.0)
    return _complex(re, im)


def fft_r2c(self, dim, normalization, onesided):
    dims = _dims(self, dim)
    n = math.prod(self.shape[d] for d in dims)
    last = dims[-1]
    m = self.shape[last] // 2 + 1 if onesided else self.shape[last]
    re, im = _dft(self, None, last, -1.0, 1.0, m)
    for d in dims[:-1]:
        re, im = _dft(re, im, d, -1.0, 1.0)
    s = _scale(n, normalization)
    if s != 1.0:
        re, im = re * s, im * s
    return _complex(re, im)


def fft_c2r(self, dim, normalization, last_dim_size):
    dims = _dims(self, dim)
    last = dims[-1]
    n_last = int(last_dim_size)
    n = math.prod(self.shape[d] for d in dims[:-1]) * n_last
    re, im = _pairs(self)
    for d in dims[:-1]:
        re, im = _dft(re, im, d, 1.0, 1.0)
    # The last dim holds the onesided half of a Hermitian spectrum: each bin but 0 (and n/2 for
    # even n) stands for itself and its conjugate mirror; imaginary parts of those two are
    # ignored, as pocketfft does.
    half = re.shape[last]
    use = min(half, n_last // 2 + 1)
    re = re.narrow(last, 0, use)
    im = im.narrow(last, 0, use)
    _check_len(n_last)
    j = torch.arange(use, dtype=torch.float64)[:, None]
    k = torch.arange(n_last, dtype=torch.float64)[None, :]
    ang = (2 * math.pi / n_last) * torch.remainder(j * k, n_last)
    w = torch.full((use, 1), 2.0, dtype=torch.float64)
    w[0] = 1.0
    if n_last % 2 == 0 and use == n_last // 2 + 1:
        w[-1] = 1.0
    c = (w * torch.cos(ang)).to(re.dtype).to(re.device)
    s = (w * torch.sin(ang)).to(re.dtype).to(re.device)
    out = re.movedim(last, -1) @ c - im.movedim(last, -1) @ s
    out = out.movedim(-1, last)
    scale = _scale(n, normalization)
    return out * scale if scale != 1.0 else out


def _highest(fn):
    @functools.wraps(fn)
    def run(*args):
        with precision(Precision.HIGHEST):
            return fn(*args)
    return run


def _out(fn):
    """The out= overload: computed functionally, then resized and copied into `out` (as
    ATen's out= kernels do). Not functools.wraps: the installer reads the signature."""
    def run(*args, out):
        r = fn(*args)
        if out.shape != r.shape:
            out.resize_(r.shape)
        return out.copy_(r)
    run.__name__ = fn.__name__ + "_out"
    return run


def table():
    t = {}
    for name, fn in (("_fft_c2c", fft_c2c), ("_fft_r2c", fft_r2c), ("_fft_c2r", fft_c2r)):
        packet = getattr(aten, name)
        t[packet.default] = _highest(fn)
        t[packet.out] = _out(_highest(fn))
    return t
