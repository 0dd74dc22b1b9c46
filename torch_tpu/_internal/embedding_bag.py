"""nn.EmbeddingBag / F.embedding_bag on tpu: aten::_embedding_bag (and _forward_only) and the
kernels of its backward (_embedding_bag_backward, _embedding_bag_dense_backward,
_embedding_bag_per_sample_weights_backward) as tpu op sequences.

Each index's bag comes from the offsets (searchsorted); rows are gathered, weighted by the
per-sample weights, and reduced into their bags with index_add (sum, mean) or scatter_reduce
(max, the first maximal row per element as on CPU). padding_idx rows count for nothing (not in
the bag size either). Auxiliary outputs, read only by our backward: offset2bag [N], bag_size [B],
max_indices [B, D] (max mode; -1 for an empty bag) or [B] zeros."""
import torch


def _bags(indices, offsets, include_last_offset):
    n = indices.numel()
    starts = offsets[:-1] if include_last_offset else offsets
    pos = torch.arange(n, device=indices.device, dtype=offsets.dtype)
    return torch.searchsorted(starts.contiguous(), pos, right=True) - 1, starts.numel()


def embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    offset2bag, nbags = _bags(indices, offsets, include_last_offset)
    d = weight.shape[1]
    valid = indices != padding_idx if padding_idx is not None and padding_idx >= 0 else torch.ones_like(indices, dtype=torch.bool)
    rows = weight.index_select(0, indices)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.unsqueeze(1).to(rows.dtype)
    bag_size = torch.zeros(nbags, dtype=torch.int64, device=weight.device).index_add(0, offset2bag, valid.to(torch.int64))
    if mode == 2:  # max
        neg = torch.full_like(rows, float("-inf"))
        rows_m = torch.where(valid.unsqueeze(1), rows, neg)
        idx2 = offset2bag.unsqueeze(1).expand(-1, d)
        out = torch.full((nbags, d), float("-inf"), dtype=weight.dtype, device=weight.device)
        out = out.scatter_reduce(0, idx2, rows_m, "amax", include_self=True)
        # The first row reaching each maximum (CPU replaces only on a strictly greater value).
        n = indices.numel()
        hit = (rows_m == out.index_select(0, offset2bag)) & valid.unsqueeze(1)
        pos = torch.arange(n, device=weight.device).unsqueeze(1).expand(-1, d)
        first = torch.full((nbags, d), n, dtype=torch.int64, device=weight.device)
        first = first.scatter_reduce(0, idx2, torch.where(hit, pos, torch.full_like(pos, n)), "amin", include_self=True)
        empty = (bag_size == 0).unsqueeze(1)
        padded = torch.cat([indices.to(torch.int64), torch.full((1,), -1, dtype=torch.int64, device=weight.device)])
        max_indices = padded.index_select(0, first.reshape(-1)).reshape(nbags, d)
        out = torch.where(empty, torch.zeros_like(out), out)
        return out, offset2bag, bag_size, max_indices
    rows = rows * valid.unsqueeze(1).to(rows.dtype)
    out = torch.zeros((nbags, d), dtype=weight.dtype, device=weight.device).index_add(0, offset2bag, rows)
    if mode == 1:  # mean
        out = out / bag_size.clamp(min=1).unsqueeze(1).to(out.dtype)
    return out, offset2bag, bag_size, torch.zeros(nbags, dtype=torch.int64, device=weight.device)


def embedding_bag_forward_only(*args, **kwargs):
    return embedding_bag(*args, **kwargs)


def dense_backward(grad, indices, offset2bag, bag_size, maximum_indices, num_weights, scale_grad_by_freq,
                   mode, per_sample_weights, padding_idx=-1):
    d = grad.shape[1]
    gw = torch.zeros((num_weights, d), dtype=grad.dtype, device=grad.device)
    if mode == 2:
        ok = maximum_indices >= 0
        cols = torch.arange(d, device=grad.device).unsqueeze(0).expand_as(maximum_indices)
        return gw.index_put((maximum_indices.clamp(min=0)[ok], cols[ok]), grad[ok], accumulate=True)
    g = grad.index_select(0, offset2bag)
    if mode == 1:
        g = g / bag_size.index_select(0, offset2bag).clamp(min=1).unsqueeze(1).to(g.dtype)
    if per_sample_weights is not None:
        g = g * per_sample_weights.unsqueeze(1).to(g.dtype)
    if scale_grad_by_freq:
        freq = torch.zeros(num_weights, dtype=torch.int64, device=grad.device).index_add(
            0, indices, torch.ones_like(indices, dtype=torch.int64))
        g = g / freq.index_select(0, indices).unsqueeze(1).to(g.dtype)
    if padding_idx is not None and padding_idx >= 0:
        g = g * (indices != padding_idx).unsqueeze(1).to(g.dtype)
    return gw.index_add(0, indices, g)


def backward(grad, indices, offsets, offset2bag, bag_size, maximum_indices, num_weights, scale_grad_by_freq, mode,
             sparse, per_sample_weights, padding_idx=-1):
    if sparse:
        raise NotImplementedError("[aten::_embedding_bag_backward] sparse gradients are not supported on tpu; "
                                  "got sparse=True, expected False")
    return dense_backward(grad, indices, offset2bag, bag_size, maximum_indices, num_weights, scale_grad_by_freq, mode,
                          per_sample_weights, padding_idx)


def per_sample_weights_backward(grad, weight, indices, offsets, offset2bag, mode, padding_idx=-1):
    g = (grad.index_select(0, offset2bag) * weight.index_select(0, indices)).sum(1)
    if padding_idx is not None and padding_idx >= 0:
        g = g * (indices != padding_idx).to(g.dtype)
    return g


def table():
    """{aten overload: python kernel} for decompositions.install()."""
    aten = torch.ops.aten
    return {
        aten._embedding_bag.default: embedding_bag,
        aten._embedding_bag_forward_only.default: embedding_bag_forward_only,
        aten._embedding_bag_backward.default: backward,
        aten._embedding_bag_dense_backward.default: dense_backward,
        aten._embedding_bag_per_sample_weights_backward.default: per_sample_weights_backward,
    }
