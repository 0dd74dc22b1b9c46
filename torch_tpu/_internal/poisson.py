"""torch.poisson on tpu: Poisson samples as a fixed sequence of tpu ops (no host sync, no
data-dependent loop), with PyTorch CPU's two regimes (aten/native/Distributions.h):

- rate < 10: counting arrivals. X = #{i : E_1 + ... + E_i <= rate}, E_j ~ Exp(1) (the
  product-of-uniforms method in log space). KNUTH_TERMS terms are summed: P(X >= 48) for a
  rate below 10 is below 1e-14, the only truncation.
- rate >= 10: Hörmann's transformed rejection (PTRS), ROUNDS proposals drawn at once and the
  first accepted one kept. A proposal is accepted with probability > 0.9 at every rate >= 10,
  so all ROUNDS = 16 fail with probability < 1e-16; such an element takes the rounded normal
  approximation of the last proposal's rate (documented, not exact).

Samples come from the tpu generator (torch.manual_seed reproduces them), not CPU's stream, so
they equal CPU's in distribution only. A negative or NaN rate raises as on CPU (checked on
the host: one sync)."""
import math

import torch

aten = torch.ops.aten

KNUTH_TERMS = 48
ROUNDS = 16


def _ptrs(lam, generator):
    """PTRS samples for rate lam (f32/f64 tensor, all >= 10 where it matters)."""
    shape = (ROUNDS,) + tuple(lam.shape)
    u = torch.rand(shape, dtype=lam.dtype, device=lam.device, generator=generator) - 0.5
    v = torch.rand(shape, dtype=lam.dtype, device=lam.device, generator=generator)
    slam = torch.sqrt(lam)
    loglam = torch.log(lam)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    vr = 0.9277 - 3.6224 / (b - 2)
    us = 0.5 - torch.abs(u)
    k = torch.floor((2 * a / us + b) * u + lam + 0.43)
    quick = (us >= 0.07) & (v <= vr)
    reject = (k < 0) | ((us < 0.013) & (v > us))
    lhs = torch.log(v) + torch.log(inv_alpha) - torch.log(a / (us * us) + b)
    rhs = -lam + k * loglam - torch.lgamma(k + 1)
    ok = quick | (~reject & (lhs <= rhs))
    # The first accepted round: argmax of the accept flags (the first True), over rounds.
    first = torch.argmax(ok.to(torch.int8), dim=0, keepdim=True)
    pick = torch.gather(k, 0, first).squeeze(0)
    any_ok = ok.any(0)
    fallback = torch.clamp(torch.round(lam + slam * torch.randn(lam.shape, dtype=lam.dtype, device=lam.device,
                                                                  generator=generator)), min=0)
    return torch.where(any_ok, pick, fallback)


def _knuth(lam, generator):
    """Arrival counts for rate lam (f32/f64 tensor, all < 10 where it matters)."""
    shape = (KNUTH_TERMS,) + tuple(lam.shape)
    u = torch.rand(shape, dtype=lam.dtype, device=lam.device, generator=generator)
    arrivals = torch.cumsum(-torch.log1p(-u), dim=0)  # E_j = -log(1 - U_j) > 0, never inf
    return (arrivals <= lam).sum(0).to(lam.dtype)


def poisson(self, generator=None):
    if self.is_complex() or not self.is_floating_point():
        raise RuntimeError(f"[aten::poisson] rates must be a floating point tensor; got {self.dtype}")
    if self.numel() == 0:
        return torch.empty_like(self)
    fdt = torch.float64 if self.dtype == torch.float64 else torch.float32
    lam = self.to(fdt)
    bad = (lam < 0) | torch.isnan(lam)
    if bool(bad.any()):
        raise RuntimeError("[aten::poisson] invalid Poisson rate, expected rate to be non-negative; "
                           "got a negative or NaN rate")
    big = lam >= 10
    small_lam = torch.where(big, torch.zeros_like(lam), lam)
    big_lam = torch.where(big, lam, torch.full_like(lam, 10.0))
    out = torch.where(big, _ptrs(big_lam, generator), _knuth(small_lam, generator))
    out = torch.where(lam == 0, torch.zeros_like(out), out)
    return out.to(self.dtype)


def table():
    return {aten.poisson.default: poisson}
