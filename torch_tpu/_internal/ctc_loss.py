"""CTC loss (`F.ctc_loss`, nn.CTCLoss; the loss of every wav2vec2-style audio model) as tpu op
sequences: `aten::_ctc_loss` and `aten::_ctc_loss_backward`, which PyTorch decomposes for no
device. The algorithm is PyTorch CPU's (aten/native/LossCTC.cpp), vectorized over the batch:

- Targets are extended with blanks, l' = (blank, l1, blank, l2, ..., blank), S' = 2L + 1.
- Forward (alpha), in log space, one step per time frame:
  alpha[t, s] = lse(alpha[t-1, s], alpha[t-1, s-1], alpha[t-1, s-2] if l'_s != blank and
  l'_s != l'_{s-2}) + log_probs[t, l'_s]; the loss is -lse(alpha[T-1, S'-1], alpha[T-1, S'-2]).
  A sequence's frames past its input length keep its last alpha.
- Backward (beta) the same way from each sequence's last frame; the gradient of log_probs is
  exp(log_probs) - sum over s with l'_s = c of exp(alpha + beta + nll - log_probs), times the
  incoming gradient; frames past the input length get 0; zero_infinity zeroes impossible
  alignments (loss inf), which otherwise give NaN gradients as on CPU. As on CPU, _ctc_loss
  itself returns inf for those (the ctc_loss wrapper applies zero_infinity to the loss).

The time loop runs in Python (T steps of a few ops each): fine for the audio models' tens to
hundreds of frames; a fused or compiled graph records it once. Each step's alpha (beta) row
goes through an optimization barrier: a step reads its predecessor at three shifts, and XLA,
fusing the unrolled steps into one loop, would recompute each predecessor per read (code and
compile time 3^T: 18 s at T = 9, no end at T = 12). On the host runtime the barrier is free."""
import torch

aten = torch.ops.aten
NEG_INF = float("-inf")


def _lengths(x):
    return [int(v) for v in (x.tolist() if isinstance(x, torch.Tensor) else x)]


def _check(log_probs, targets, input_lengths, target_lengths, blank):
    name = "[aten::_ctc_loss]"
    if log_probs.dim() != 3:
        raise RuntimeError(f"{name} log_probs must be 3-D (T, N, C); got {log_probs.dim()}-D, expected 3-D")
    T, N, C = log_probs.shape
    if not 0 <= blank < C:
        raise RuntimeError(f"{name} blank must be in label range; got {blank}, expected 0..{C - 1}")
    if len(input_lengths) != N or len(target_lengths) != N:
        raise RuntimeError(f"{name} input_lengths and target_lengths must have one entry per batch element; "
                           f"got {len(input_lengths)} and {len(target_lengths)}, expected {N}")
    for b, (il, tl) in enumerate(zip(input_lengths, target_lengths)):
        if not 0 <= il <= T:
            raise RuntimeError(f"{name} Expected input_lengths to have value at most {T}, but got value {il} "
                               f"(while checking arguments for ctc_loss_cpu)")
        if tl < 0:
            raise RuntimeError(f"{name} target_lengths must be non-negative; got {tl} at {b}")
    if targets.dim() == 2 and targets.shape[0] == N and max(target_lengths, default=0) > targets.shape[1]:
        raise RuntimeError(f"{name} Expected tensor to have size at least {max(target_lengths)} at dimension 1, "
                           f"but got size {targets.shape[1]} for argument #2 'targets' (while checking arguments "
                           f"for ctc_loss_cpu)")
    if targets.dim() == 1 and sum(target_lengths) > targets.numel():
        raise RuntimeError(f"{name} targets holds {targets.numel()} labels; got target_lengths summing to "
                           f"{sum(target_lengths)}, expected at most {targets.numel()}")


def _extended(log_probs, targets, target_lengths, blank):
    """Extended targets l' [N, S'] (blank-padded past each 2L+1), the mask of valid s, and the
    mask of allowed skips s-2 -> s."""
    T, N, C = log_probs.shape
    dev = log_probs.device
    max_l = max(target_lengths, default=0)
    sp = 2 * max_l + 1
    tl = torch.tensor(target_lengths, dtype=torch.int64, device=dev)
    if max_l == 0:
        labels = torch.zeros(N, 0, dtype=torch.int64, device=dev)
    elif targets.dim() == 2 and targets.shape[0] == N:
        labels = targets[:, :max_l].to(torch.int64)
    else:  # 1-D: the targets of all sequences concatenated
        starts = [0]
        for n in target_lengths[:-1]:
            starts.append(starts[-1] + n)
        idx = torch.tensor(starts, dtype=torch.int64, device=dev)[:, None] + torch.arange(max_l, device=dev)[None, :]
        idx = torch.minimum(idx, torch.tensor(max(targets.numel() - 1, 0), device=dev))
        labels = targets.to(torch.int64).reshape(-1)[idx.reshape(-1)].reshape(N, max_l)
    pos = torch.arange(max_l, device=dev)[None, :]
    labels = torch.where(pos < tl[:, None], labels, blank)
    ext = torch.full((N, sp), blank, dtype=torch.int64, device=dev)
    if max_l:
        ext[:, 1::2] = labels
    s = torch.arange(sp, device=dev)[None, :]
    valid = s < (2 * tl + 1)[:, None]
    prev2 = torch.cat([torch.full((N, 2), -1, dtype=torch.int64, device=dev), ext[:, :-2]], 1) if sp > 2 else \
        torch.full((N, sp), -1, dtype=torch.int64, device=dev)
    skip = (s >= 2) & (ext != blank) & (ext != prev2)
    return ext, valid, skip, tl


def _barrier(*xs):
    """The tensors behind an optimization barrier (a tuple, one per argument)."""
    from torch_tpu.ops import _barrier as kernel  # noqa: PLC0415  (imports torch.library ops)

    return kernel(*xs)


def _lse3(a, b, c):
    m = torch.maximum(torch.maximum(a, b), c)
    m = torch.where(m == NEG_INF, torch.zeros_like(m), m)
    return torch.log(torch.exp(a - m) + torch.exp(b - m) + torch.exp(c - m)) + m


def _shift(x, k):
    """x shifted right by k along the last dim, -inf entering."""
    if k >= x.shape[-1]:
        return torch.full_like(x, NEG_INF)
    pad = torch.full(x.shape[:-1] + (k,), NEG_INF, dtype=x.dtype, device=x.device)
    return torch.cat([pad, x[..., :-k]], -1)


def _unshift(x, k):
    """x shifted left by k along the last dim, -inf entering."""
    if k >= x.shape[-1]:
        return torch.full_like(x, NEG_INF)
    pad = torch.full(x.shape[:-1] + (k,), NEG_INF, dtype=x.dtype, device=x.device)
    return torch.cat([x[..., k:], pad], -1)


def _alpha(lpe, valid, skip, il):
    """log_alpha [N, T, S'] and each sequence's last alpha row [N, S']."""
    T, N, sp = lpe.shape
    neg = torch.full((N, sp), NEG_INF, dtype=lpe.dtype, device=lpe.device)
    s = torch.arange(sp, device=lpe.device)[None, :]
    la = torch.where((s < 2) & valid, lpe[0], neg) if T else neg
    rows = [la]
    last = la
    for t in range(1, T):
        step = _lse3(la, _shift(la, 1), torch.where(skip, _shift(la, 2), neg)) + lpe[t]
        step = torch.where(valid, step, neg)
        live = (il > t)[:, None]
        la, row = _barrier(torch.where(live, step, la), torch.where(live, step, neg))
        rows.append(row)
    log_alpha = torch.stack(rows, 1) if T else torch.zeros(N, 0, sp, dtype=lpe.dtype, device=lpe.device)
    return log_alpha, la


def _nll(last, tl, il):
    n = last.shape[0]
    rows = torch.arange(n, device=last.device)
    end = last[rows, 2 * tl]
    before = torch.where(tl > 0, last[rows, (2 * tl - 1).clamp(min=0)], torch.full_like(end, NEG_INF))
    m = torch.maximum(end, before)
    m = torch.where(m == NEG_INF, torch.zeros_like(m), m)
    nll = -(torch.log(torch.exp(end - m) + torch.exp(before - m)) + m)
    # An empty input (length 0) can only emit the empty target.
    empty = il == 0
    return torch.where(empty, torch.where(tl == 0, torch.zeros_like(nll), torch.full_like(nll, float("inf"))), nll)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    il_list, tl_list = _lengths(input_lengths), _lengths(target_lengths)
    _check(log_probs, targets, il_list, tl_list, blank)
    T, N, C = log_probs.shape
    ext, valid, skip, tl = _extended(log_probs, targets, tl_list, blank)
    il = torch.tensor(il_list, dtype=torch.int64, device=log_probs.device)
    lpe = log_probs.gather(2, ext[None].expand(T, N, ext.shape[1]))
    log_alpha, last = _alpha(lpe, valid, skip, il)
    return _nll(last, tl, il), log_alpha  # zero_infinity: the ctc_loss wrapper zeroes inf


def ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths, neg_log_likelihood, log_alpha,
                      blank, zero_infinity=False):
    il_list, tl_list = _lengths(input_lengths), _lengths(target_lengths)
    T, N, C = log_probs.shape
    ext, valid, skip, tl = _extended(log_probs, targets, tl_list, blank)
    sp = ext.shape[1]
    dev = log_probs.device
    il = torch.tensor(il_list, dtype=torch.int64, device=dev)
    lpe = log_probs.gather(2, ext[None].expand(T, N, sp))
    nll = neg_log_likelihood
    neg = torch.full((N, sp), NEG_INF, dtype=log_probs.dtype, device=dev)
    s = torch.arange(sp, device=dev)[None, :]
    ends = valid & (s >= (2 * tl)[:, None] - 1)  # the last two positions (one when L = 0)
    # skip into s from s + 2: allowed when s + 2 may skip back to s.
    skip_next = _unshift(skip.to(log_probs.dtype), 2) == 1
    lb = neg
    betas = [None] * T
    for t in range(T - 1, -1, -1):
        init = torch.where(ends, lpe[t], neg)
        step = _lse3(lb, _unshift(lb, 1), torch.where(skip_next, _unshift(lb, 2), neg)) + lpe[t]
        step = torch.where(valid, step, neg)
        first = (il - 1 == t)[:, None]
        inside = (il - 1 > t)[:, None]
        (lb,) = _barrier(torch.where(first, init, torch.where(inside, step, neg)))
        betas[t] = lb
    if T == 0:
        return torch.zeros_like(log_probs)
    log_beta = torch.stack(betas, 0)  # [T, N, S']
    la = log_alpha.transpose(0, 1)  # [T, N, S']
    finite = torch.isfinite(nll)
    nll_safe = torch.where(finite, nll, torch.zeros_like(nll))
    occ = torch.exp(la + log_beta + nll_safe[None, :, None] - lpe)
    occ = torch.where((la == NEG_INF) | (log_beta == NEG_INF), torch.zeros_like(occ), occ)
    per_class = torch.zeros_like(log_probs).scatter_add(2, ext[None].expand(T, N, sp), occ)
    g = torch.exp(log_probs) - per_class
    t_idx = torch.arange(T, device=dev)[:, None]
    live = (t_idx < il[None, :])[:, :, None]
    g = torch.where(live, g, torch.zeros_like(g))
    bad = (~finite)[None, :, None]
    if zero_infinity:
        g = torch.where(bad, torch.zeros_like(g), g)
    else:  # as CPU: an impossible alignment's gradient is NaN
        g = torch.where(bad & live, torch.full_like(g, float("nan")), g)
    return g * grad[None, :, None]


def table():
    return {
        aten._ctc_loss.default: ctc_loss,
        aten._ctc_loss.Tensor: ctc_loss,
        aten._ctc_loss_backward.default: ctc_loss_backward,
        aten._ctc_loss_backward.Tensor: ctc_loss_backward,
    }
