"""Op families that reduce or index over a dynamic (sequence) dim 1 of a [3, T, 5] input: the
masking cases shared by the torch.compile bucket tests and the eager mark_dynamic tests."""
import torch
import torch.nn.functional as F

FAMILIES = [
    ("sum", lambda x: x.sum(1)),
    ("mean", lambda x: x.mean(dim=1, keepdim=True) * 2),
    ("mean_all", lambda x: x.mean()),
    ("softmax", lambda x: torch.softmax(x, dim=1)),
    ("log_softmax_feature", lambda x: F.log_softmax(x, dim=-1)),
    ("cumsum", lambda x: x.cumsum(1)),
    ("amax", lambda x: x.amax(1)),
    ("merged_view_mean", lambda x: x.reshape(-1, x.shape[-1]).mean(0)),
    ("shifted", lambda x: (x[:, 1:] - x[:, :-1]).sum(1)),
    ("matmul_over_seq", lambda x: x.transpose(1, 2) @ x),
    ("size_scalar", lambda x: x.sum(1) / x.shape[1]),
    ("arange_offset", lambda x: (x * torch.arange(2, 2 + x.shape[1], device=x.device)[None, :, None]).sum(1)),
    ("unsqueeze_expand_cat", lambda x: torch.cat(
        [x.unsqueeze(2).expand(-1, -1, 2, -1).reshape(x.shape[0], x.shape[1], -1), x.unsqueeze(0).squeeze(0)], -1).sum(1)),
    ("pad_end", lambda x: F.pad(x, (0, 0, 0, 2), value=3.0)[:, 1:].sum(1)),
]
