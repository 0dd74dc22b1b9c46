"""F.ctc_loss / nn.CTCLoss on tpu (torch_tpu/_internal/ctc_loss.py) against PyTorch CPU: loss
and log_probs gradient, padded (2-D) and concatenated (1-D) targets, uneven input and target
lengths, repeated labels, empty targets, every reduction, zero_infinity on impossible
alignments (and the NaN gradient without it), float32 and float64, strict and fused modes."""
import pytest
import torch
import torch.nn.functional as F

import torch_tpu

DEV = "tpu"


def _case(T=12, N=3, C=6, S=5, seed=0, dtype=torch.float32, flat=False, repeats=False, empty=False):
    g = torch.Generator().manual_seed(seed)
    lp = torch.randn(T, N, C, generator=g, dtype=dtype).log_softmax(2)
    tl = torch.randint(1, S + 1, (N,), generator=g)
    if empty:
        tl[0] = 0
    il = torch.randint(T // 2 + S, T + 1, (N,), generator=g).clamp(max=T)
    targets = torch.randint(1, C, (N, S), generator=g)
    if repeats:
        targets[:, 1] = targets[:, 0]
    if flat:
        targets = torch.cat([targets[i, : tl[i]] for i in range(N)])
    return lp, targets, il, tl


def _run(lp, targets, il, tl, device, reduction="mean", zero_infinity=False, blank=0):
    x = lp.detach().to(device).requires_grad_()
    loss = F.ctc_loss(x, targets.to(device), il, tl, blank=blank, reduction=reduction, zero_infinity=zero_infinity)
    loss.sum().backward()
    return loss.detach().cpu(), x.grad.cpu()


def _check(case_kw, mode="strict", **kw):
    lp, targets, il, tl = _case(**case_kw)
    want_loss, want_grad = _run(lp, targets, il, tl, "cpu", **kw)
    eager = torch_tpu.EagerMode.DEFER_AND_FUSE if mode == "fused" else torch_tpu.EagerMode.DEFER_NEVER
    with torch_tpu.eager_mode(eager):
        got_loss, got_grad = _run(lp, targets, il, tl, DEV, **kw)
    tol = dict(rtol=1e-5, atol=1e-5) if lp.dtype == torch.float32 else dict(rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(got_loss, want_loss, equal_nan=True, **tol)
    torch.testing.assert_close(got_grad, want_grad, equal_nan=True, **tol)


@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("case", [
    {}, {"flat": True}, {"repeats": True}, {"empty": True, "flat": True}, {"dtype": torch.float64},
    {"T": 30, "N": 2, "C": 10, "S": 8, "seed": 3},
], ids=["padded", "flat", "repeats", "empty-target", "f64", "longer"])
def test_ctc_loss_matches_cpu(case, mode):
    _check(case, mode)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_ctc_loss_reductions_and_blank(reduction):
    _check({"seed": 1}, reduction=reduction)
    lp, targets, il, tl = _case(seed=2)
    targets = torch.where(targets == 5, 1, targets)  # labels 1..4: blank may be 5
    want = _run(lp, targets, il, tl, "cpu", reduction=reduction, blank=5)
    got = _run(lp, targets, il, tl, DEV, reduction=reduction, blank=5)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_impossible_alignment(zero_infinity):
    # Target longer than the input allows: loss inf (0 with zero_infinity), grads NaN (0).
    lp = torch.randn(3, 2, 5, generator=torch.Generator().manual_seed(0)).log_softmax(2)
    targets = torch.tensor([[1, 1, 1, 1], [1, 2, 0, 0]])
    il, tl = torch.tensor([3, 3]), torch.tensor([4, 2])
    want = _run(lp, targets, il, tl, "cpu", reduction="none", zero_infinity=zero_infinity)
    got = _run(lp, targets, il, tl, DEV, reduction="none", zero_infinity=zero_infinity)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, equal_nan=True, rtol=1e-5, atol=1e-5)


def test_bad_lengths_raise():
    lp, targets, il, tl = _case()
    with pytest.raises(RuntimeError, match="input_lengths"):
        F.ctc_loss(lp.to(DEV), targets.to(DEV), il + 100, tl)
    with pytest.raises(RuntimeError, match="blank"):
        F.ctc_loss(lp.to(DEV), targets.to(DEV), il, tl, blank=99)
