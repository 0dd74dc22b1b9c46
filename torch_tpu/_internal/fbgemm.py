"""tpu kernels for the fbgemm_gpu operators TorchRec's KeyedJaggedTensor calls, as composites of
tpu ops registered through torch.library for PrivateUse1 when fbgemm_gpu loads (torch_tpu's
import hook). The rest of TorchRec's unsharded path (EmbeddingBagCollection,
EmbeddingCollection, DLRM) runs on ATen ops that tpu lowers already."""
import torch

_done = False


def _complete_cumsum(t: torch.Tensor) -> torch.Tensor:
    """[0, t0, t0+t1, ...] along the last dim (fbgemm's asynchronous_complete_cumsum, 1-D or 2-D)."""
    if t.dim() not in (1, 2):
        raise ValueError(f"[fbgemm::asynchronous_complete_cumsum] expected a 1-D or 2-D tensor; got {t.dim()}-D")
    c = torch.cumsum(t, dim=-1).to(t.dtype)
    return torch.nn.functional.pad(c, (1, 0))


def _permute_2d_sparse_data(permute, lengths, values, weights=None, permuted_lengths_sum=None):
    """Features of a [T, B] jagged batch reordered by `permute`: lengths rows, and the values
    (and weights) of each feature's contiguous segment, in the new order."""
    if lengths.dim() != 2:
        raise ValueError(f"[fbgemm::permute_2D_sparse_data] lengths must be [T, B]; got {tuple(lengths.shape)}")
    idx = permute.to(torch.int64)
    out_lengths = lengths.index_select(0, idx)
    per_feature = lengths.sum(1).to(torch.int64)
    starts = _complete_cumsum(per_feature)[:-1]
    seg = per_feature.index_select(0, idx)
    total = int(permuted_lengths_sum) if permuted_lengths_sum is not None else int(seg.sum().item())
    out_starts = _complete_cumsum(seg)[:-1]
    owner = torch.repeat_interleave(torch.arange(idx.numel(), device=idx.device), seg, output_size=total)
    src = torch.arange(total, device=values.device) - out_starts[owner] + starts.index_select(0, idx)[owner]
    out_values = values.index_select(0, src)
    out_weights = weights.index_select(0, src) if weights is not None else None
    return out_lengths, out_values, out_weights


def install(module=None) -> None:
    """Registers the kernels (idempotent; after fbgemm_gpu, `module`, has defined the operators)."""
    global _done
    if _done or not hasattr(torch.ops, "fbgemm"):
        return
    lib = torch.library.Library("fbgemm", "IMPL")
    for name, fn in (("asynchronous_complete_cumsum", _complete_cumsum),
                     ("permute_2D_sparse_data", _permute_2d_sparse_data)):
        op = getattr(torch.ops.fbgemm, name, None)
        if op is None or torch._C._dispatch_has_kernel_for_dispatch_key(op.default.name(), "PrivateUse1"):
            continue
        lib.impl(name, fn, "PrivateUse1")
    install.lib = lib  # the registrations live as long as the Library object
    _done = True
