"""torch.unique / unique_consecutive on tpu (aten::_unique, _unique2, unique_dim,
unique_consecutive, unique_dim_consecutive) as tpu op sequences. The result's size depends on the data, so each
call is a sync point (one nonzero), as on CUDA.

The elements (dim=None) or the slices along `dim` are rows; unique sorts the rows
lexicographically (stable sorts, last column first: CPU sorts too, for sorted=False as well),
marks each row that differs from the previous one, and reads the marked rows; the inverse is
the running count of marks (scattered back through the sort order), the counts the distances
between marks. NaNs compare unequal, so each NaN is its own value, as on CPU. Outputs that
were not asked for are empty int64 tensors, as CPU returns them."""
import torch


def _rows(x, dim):
    if dim is None:
        return x.reshape(-1, 1), None
    r = max(x.dim(), 1)
    if not -r <= dim < r:
        raise IndexError(f"[aten::unique] Dimension out of range (expected to be in range of [{-r}, {r - 1}], but got {dim})")
    d = dim % r
    if x.numel() == 0 and x.dim() > 0:  # CPU's checks (unique_dim_cpu_template)
        if x.shape[d] != 0:
            raise RuntimeError("[aten::unique] There are 0 sized dimensions, and they aren't selected, so unique cannot be applied")
        if sum(1 for s in x.shape if s == 0) > 1:
            raise RuntimeError("[aten::unique] Number of zero sized dimensions is more than one, so unique cannot be applied")
    moved = x.movedim(d, 0)
    m = 1
    for v in moved.shape[1:]:
        m *= v
    return moved.reshape(x.shape[d], m), (d, moved.shape[1:])


def _unique_rows(rows, sort):
    n, m = rows.shape
    dev = rows.device
    order = None
    if sort and n > 1:
        order = torch.arange(n, device=dev)
        for c in reversed(range(m)):
            key = rows[:, c].index_select(0, order)
            order = order.index_select(0, torch.sort(key, stable=True).indices)
        rows = rows.index_select(0, order)
    if n == 0:
        new = torch.zeros(0, dtype=torch.bool, device=dev)
    else:
        differs = (rows[1:] != rows[:-1]).any(1) if m > 0 else torch.zeros(n - 1, dtype=torch.bool, device=dev)
        new = torch.cat([torch.ones(1, dtype=torch.bool, device=dev), differs])
    first = new.nonzero().reshape(-1)
    uniq = rows.index_select(0, first)
    group = new.to(torch.int64).cumsum(0) - 1
    inverse = group if order is None else torch.empty_like(group).index_put_((order,), group)
    counts = torch.diff(torch.cat([first, torch.full((1,), n, dtype=first.dtype, device=dev)]))
    return uniq, inverse, counts


def _unique(x, dim, sort, return_inverse, return_counts):
    rows, moved = _rows(x, dim)
    uniq, inverse, counts = _unique_rows(rows, sort)
    if moved is None:
        out = uniq.reshape(-1)
        inverse = inverse.reshape(x.shape)
    else:
        d, rest = moved
        out = uniq.reshape((uniq.shape[0],) + tuple(rest)).movedim(0, d)
    empty = x.new_empty(0, dtype=torch.int64)
    return out, inverse if return_inverse else empty, counts if return_counts else empty


def unique2(self, sorted=True, return_inverse=False, return_counts=False):
    return _unique(self, None, True, return_inverse, return_counts)


def unique(self, sorted=True, return_inverse=False):  # aten::_unique (index_fill's backward)
    out, inverse, _ = _unique(self, None, True, return_inverse, False)
    return out, inverse


def unique_dim(self, dim, sorted=True, return_inverse=False, return_counts=False):
    return _unique(self, dim, True, return_inverse, return_counts)


def unique_consecutive(self, return_inverse=False, return_counts=False, dim=None):
    return _unique(self, dim, False, return_inverse, return_counts)


def unique_dim_consecutive(self, dim, return_inverse=False, return_counts=False):
    return _unique(self, dim, False, return_inverse, return_counts)


def table():
    """{aten overload: python kernel} for decompositions.install()."""
    aten = torch.ops.aten
    t = {}
    for packet, fn in ((aten._unique, unique), (aten._unique2, unique2), (aten.unique_dim, unique_dim),
                       (aten.unique_consecutive, unique_consecutive), (aten.unique_dim_consecutive, unique_dim_consecutive)):
        t[packet.default] = fn
        t[packet.out] = fn
    return t
