"""torch.poisson on tpu (torch_tpu/_internal/poisson.py): samples are non-negative integers
whose distribution matches Poisson(rate) at rates in both regimes (counting below 10, PTRS
from 10): mean, variance and the histogram against the pmf (a chi-square statistic far below
its 99.9% quantile), per dtype; rate 0 gives 0; torch.manual_seed reproduces; bad rates raise."""
import math

import pytest
import torch

import torch_tpu  # noqa: F401

N = 20000


def _pmf(k, lam):
    return math.exp(-lam + k * math.log(lam) - math.lgamma(k + 1))


@pytest.mark.parametrize("lam", [0.3, 2.5, 9.5, 10.0, 37.0, 400.0])
def test_distribution_matches_poisson(lam):
    torch.manual_seed(0)
    x = torch.poisson(torch.full((N,), lam, device="tpu")).cpu().double()
    assert (x >= 0).all() and torch.equal(x, x.round())
    sd = math.sqrt(lam / N)
    assert abs(x.mean().item() - lam) < 5 * sd, x.mean()
    assert abs(x.var().item() / lam - 1) < 0.08, x.var()
    # Chi-square over bins with expected count >= 20 (the tails pooled into the edge bins).
    lo, hi = int(max(0, lam - 4 * math.sqrt(lam) - 1)), int(lam + 4 * math.sqrt(lam) + 2)
    ks = [k for k in range(lo, hi + 1) if N * _pmf(k, lam) >= 20]
    chi, dof = 0.0, 0
    for k in ks:
        e = N * _pmf(k, lam)
        o = (x == k).sum().item()
        chi += (o - e) ** 2 / e
        dof += 1
    # 99.9% quantile of chi-square(dof) is below dof + 3.1 * sqrt(2 dof) + 10 for these dofs.
    assert chi < dof + 3.1 * math.sqrt(2 * dof) + 10, (chi, dof)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_dtypes_zero_rate_and_seed(dtype):
    rates = torch.tensor([0.0, 1.0, 15.0, 0.0, 200.0], dtype=dtype).repeat(50).to("tpu")
    torch.manual_seed(3)
    a = torch.poisson(rates)
    torch.manual_seed(3)
    b = torch.poisson(rates)
    assert a.dtype == dtype and a.device.type == "tpu"
    assert torch.equal(a.cpu(), b.cpu())
    assert (a.cpu()[rates.cpu() == 0] == 0).all()


def test_bad_rates_raise():
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.poisson(torch.tensor([1.0, -1.0], device="tpu"))
    with pytest.raises(RuntimeError, match="floating point"):
        torch.poisson(torch.tensor([1, 2], device="tpu"))
    assert torch.poisson(torch.empty(0, device="tpu")).shape == (0,)
