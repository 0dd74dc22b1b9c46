"""Masking rules of bounded dynamism (issue 19 step 2): a Dynamo FX graph interpreted over
padded values, per torch function; an op without a rule raises Refuse. Used by buckets.py.

Value model: a padded tensor (`PT`) carries `pads`, {dim: factors}; factors is a row-major
tuple of (size, lin) with lin None (all real) or a `Lin` a*s+c (real iff index < a*n+c), so a
merged view(B * s, V) is ((B, None), (P, Lin(1, 0))). Ints derived from the symbol are Lins.
Invariant: padded positions may hold anything; real positions are exact.
"""
from __future__ import annotations

import math
import operator

import torch
import torch.nn.functional as F

class Refuse(Exception):
    """The graph has an op touching a padded dim without a masking rule."""


class Lin:
    """a * s + c for the padded symbol s."""

    __slots__ = ("a", "c")

    def __init__(self, a: int, c: int):
        self.a, self.c = a, c

    def at(self, s: int) -> int:
        return self.a * s + self.c

    def __eq__(self, o):
        return isinstance(o, Lin) and (self.a, self.c) == (o.a, o.c)

    def __hash__(self):
        return hash((self.a, self.c))

    def __repr__(self):
        return f"{self.a}*s{self.c:+d}"


class PT:
    """A padded tensor: `t` (padded sizes) and `pads` {dim: factors}."""

    __slots__ = ("t", "pads")

    def __init__(self, t, pads):
        self.t, self.pads = t, {d: f for d, f in pads.items()}


def _is_padded(f) -> bool:
    return any(lin is not None for _, lin in f)


def _mask1d(factors, n, device):
    m = None
    for size, lin in factors:
        if lin is None:
            f = torch.ones(size, dtype=torch.bool, device=device)
        else:
            f = torch.arange(size, device=device) < (n * lin.a + lin.c)
        m = f if m is None else (m[:, None] & f[None, :]).reshape(-1)
    return m


class _Ctx:
    def __init__(self, n, device, s_pad: int):
        self.n, self.device, self.B = n, device, s_pad

    def mask(self, pt: PT, dims) -> torch.Tensor | None:
        """Bool mask broadcastable to pt.t: real along `dims` (only padded ones count)."""
        m = None
        nd = pt.t.dim()
        for d in dims:
            f = pt.pads.get(d)
            if f is None:
                continue
            shape = [1] * nd
            shape[d] = -1
            md = _mask1d(f, self.n, self.device).view(shape)
            m = md if m is None else m & md
        return m

    def count(self, pt: PT, dims):
        """The number of real elements over `dims` (a tensor when any is padded, else an int)."""
        c = 1
        for d in dims:
            f = pt.pads.get(d)
            if f is None:
                c = c * pt.t.shape[d]
            else:
                for size, lin in f:
                    c = c * (size if lin is None else (self.n * lin.a + lin.c))
        return c

    def lin_value(self, v: Lin):
        return self.n * v.a + v.c


def _val(x):
    return x.t if isinstance(x, PT) else x


def _dims(dim, nd):
    if dim is None:
        return list(range(nd))
    if isinstance(dim, int):
        dim = [dim]
    return sorted(d % nd for d in dim)


def _padded_dims(x) -> dict:
    return x.pads if isinstance(x, PT) else {}


# ----------------------------------------------------------------------------- rules

_ELEMENTWISE_FNS = {
    operator.add, operator.sub, operator.mul, operator.truediv, operator.neg, operator.pow,
    operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne, operator.and_, operator.or_,
    torch.add, torch.sub, torch.mul, torch.div, torch.neg, torch.exp, torch.log, torch.tanh, torch.sigmoid,
    torch.rsqrt, torch.sqrt, torch.abs, torch.pow, torch.where, torch.maximum, torch.minimum, torch.square,
    torch.sin, torch.cos, torch.erf, torch.clamp, torch.relu,
    F.gelu, F.relu, F.silu, F.tanh, F.sigmoid, F.softplus, F.leaky_relu, F.elu, F.mish,
    torch._C._nn.gelu, torch._C._nn.silu, torch._C._nn.softplus, torch._C._nn.leaky_relu, torch._C._nn.elu,
    torch._C._nn.mish,
}
_ELEMENTWISE_METHODS = {
    "add", "sub", "mul", "div", "neg", "exp", "log", "tanh", "sigmoid", "rsqrt", "sqrt", "abs", "pow",
    "float", "half", "bfloat16", "to", "type_as", "contiguous", "clone", "detach", "relu", "square",
    "masked_fill", "clamp", "sin", "cos", "__add__", "__mul__", "__sub__", "__truediv__", "int", "long", "bool",
}


def _broadcast_pads(args, out_nd: int, shapes) -> dict:
    """Pads of an elementwise result: operands' pads aligned from the right; every padded
    output dim must come from operands that agree (size-1 operands broadcast)."""
    pads: dict[int, tuple] = {}
    for a, shp in zip(args, shapes):
        off = out_nd - len(shp)
        for d, f in _padded_dims(a).items():
            od = d + off
            if od in pads and pads[od] != f:
                raise Refuse(f"elementwise operands padded differently along dim {od}")
            pads[od] = f
    for a, shp in zip(args, shapes):  # an unpadded operand spanning a padded dim: unknown
        off = out_nd - len(shp)
        pd = _padded_dims(a)
        for od in pads:
            d = od - off
            if 0 <= d < len(shp) and shp[d] != 1 and d not in pd:
                raise Refuse(f"an unpadded operand spans padded dim {od}")
    return pads


def _to_real(ctx, x):
    """A Lin operand of arithmetic becomes the true size as a tensor."""
    if isinstance(x, Lin):
        return ctx.lin_value(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_to_real(ctx, v) for v in x)
    return _val(x)


def _elementwise(ctx, fn, args, kwargs):
    flat = [a for a in list(args) + list(kwargs.values())]
    ptargs = [a for a in flat if isinstance(a, (PT, torch.Tensor))]
    res = fn(*[_to_real(ctx, a) for a in args], **{k: _to_real(ctx, v) for k, v in kwargs.items()})
    if not isinstance(res, torch.Tensor):
        return res
    pads = _broadcast_pads(ptargs, res.dim(), [tuple(_val(a).shape) for a in ptargs])
    return PT(res, pads) if pads else res


def _reduce(ctx, x: PT, dim, keepdim, how: str, dtype=None):
    nd = x.t.dim()
    dims = _dims(dim, nd)
    m = ctx.mask(x, dims)
    t = x.t
    if m is not None:
        if how in ("sum", "mean"):
            t = torch.where(m, t, torch.zeros((), dtype=t.dtype, device=t.device))
        elif how == "amax":
            t = torch.where(m, t, torch.full((), -math.inf, dtype=t.dtype, device=t.device))
        elif how == "amin":
            t = torch.where(m, t, torch.full((), math.inf, dtype=t.dtype, device=t.device))
    kw = {"dtype": dtype} if dtype is not None else {}
    if how == "mean":
        r = torch.sum(t, dim=dims, keepdim=keepdim, **kw)
        r = r / ctx.count(x, dims)
    elif how == "sum":
        r = torch.sum(t, dim=dims, keepdim=keepdim, **kw)
    else:
        r = getattr(torch, how)(t, dim=dims, keepdim=keepdim)
    pads = {}
    for d, f in x.pads.items():
        if d in dims:
            continue
        pads[d if keepdim else d - sum(1 for e in dims if e < d)] = f
    return PT(r, pads) if pads else r


def _softmax(ctx, fn, x, dim, dtype=None, _stacklevel=None):
    nd = x.t.dim()
    d = dim % nd
    t = x.t
    m = ctx.mask(x, [d])
    if m is not None:  # a large finite fill: fully padded rows stay finite (no nan gradients)
        t = torch.where(m, t, torch.full((), torch.finfo(t.dtype).min, dtype=t.dtype, device=t.device))
    r = fn(t, d, dtype=dtype) if dtype is not None else fn(t, d)
    return PT(r, x.pads)


def _cumsum(ctx, x, dim, dtype=None):
    d = dim % x.t.dim()
    f = x.pads.get(d)
    t = x.t
    if f is not None and len(f) > 1:  # a merged dim: padding sits between real rows
        t = torch.where(ctx.mask(x, [d]), t, torch.zeros((), dtype=t.dtype, device=t.device))
    return PT(torch.cumsum(t, d, dtype=dtype), x.pads)


def _loss(ctx, fn, input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
          reduction="mean", label_smoothing=None):
    if size_average is not None or reduce is not None:
        raise Refuse(f"{fn.__name__} with legacy size_average/reduce")
    if weight is not None:
        raise Refuse(f"{fn.__name__} with class weights over a padded dim")
    x, t = input, target
    if 1 in _padded_dims(x) or not isinstance(t, PT) or not isinstance(x, PT):
        raise Refuse(f"{fn.__name__}: padded class dim or unpadded target")
    if _val(t).dtype.is_floating_point:
        raise Refuse(f"{fn.__name__} with probability targets")
    if {d + (1 if d >= 1 else 0) for d in t.pads} != set(x.pads) or any(
            x.pads[d + (1 if d >= 1 else 0)] != f for d, f in t.pads.items()):
        raise Refuse(f"{fn.__name__}: input and target padded differently")
    tm = ctx.mask(t, list(t.pads))
    tt = torch.where(tm, t.t, torch.full((), ignore_index, dtype=t.t.dtype, device=t.t.device))
    kw = {} if label_smoothing is None else {"label_smoothing": label_smoothing}
    per = fn(x.t, tt, ignore_index=ignore_index, reduction="none", **kw)
    if reduction == "none":
        return PT(per, t.pads)
    per = torch.where(tm, per, torch.zeros((), dtype=per.dtype, device=per.device))
    s = per.sum()
    if reduction == "sum":
        return s
    if reduction != "mean":
        raise Refuse(f"{fn.__name__} reduction={reduction!r}")
    return s / (tt != ignore_index).sum().to(per.dtype)


def _sdpa(ctx, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    if dropout_p:
        raise Refuse("scaled_dot_product_attention with dropout over padded positions")
    if attn_mask is not None and (isinstance(attn_mask, PT) or isinstance(k, PT)):
        raise Refuse("scaled_dot_product_attention with an attn_mask over a padded dim")
    kp, vp, qp = _padded_dims(k), _padded_dims(v), _padded_dims(q)
    nd = _val(q).dim()
    for d in range(nd - 2):
        if any(d in p for p in (kp, vp)):
            raise Refuse("scaled_dot_product_attention padded along a batch dim of k/v")
    if nd - 1 in qp or nd - 1 in kp or nd - 1 in vp:
        raise Refuse("scaled_dot_product_attention padded along the head dim")
    if kp.get(nd - 2) != vp.get(nd - 2):
        raise Refuse("scaled_dot_product_attention: k and v padded differently")
    kw = {"scale": scale} if scale is not None else {}
    if enable_gqa:
        kw["enable_gqa"] = True
    mask = None
    if nd - 2 in kp:
        if is_causal:
            # Padding at the end: real query i sees keys <= i, all real, iff q and k share the
            # same single prefix factor (same real length, same padded length).
            if qp.get(nd - 2) != kp[nd - 2] or len(kp[nd - 2]) != 1:
                raise Refuse("causal scaled_dot_product_attention with q and k padded differently")
        else:
            mask = _mask1d(kp[nd - 2], ctx.n, _val(k).device)  # keys: real ones only
    r = F.scaled_dot_product_attention(_val(q), _val(k), _val(v), attn_mask=mask, dropout_p=0.0,
                                       is_causal=is_causal, **kw)
    pads = {d: f for d, f in qp.items()}
    return PT(r, pads) if pads else r


def _contract(ctx, a, b):
    """matmul: mask the contraction dim when padded; batch dims broadcast like elementwise."""
    ta, tb = _val(a), _val(b)
    if ta.dim() < 2 or tb.dim() < 2:
        raise Refuse("matmul with a 1-d padded operand")
    pa, pb = _padded_dims(a), _padded_dims(b)
    ka, kb = ta.dim() - 1, tb.dim() - 2
    if (ka in pa) or (kb in pb):
        if pa.get(ka) != pb.get(kb):
            raise Refuse("matmul contraction padded differently")
        # Both operands: padded garbage may be inf, and inf * 0 is nan.
        ta = torch.where(ctx.mask(a, [ka]), ta, torch.zeros((), dtype=ta.dtype, device=ta.device))
        tb = torch.where(ctx.mask(b, [kb]), tb, torch.zeros((), dtype=tb.dtype, device=tb.device))
    r = torch.matmul(ta, tb)
    nd = r.dim()
    for p, t in ((pa, ta), (pb, tb)):  # padded batch dims: the other operand padded alike or 1
        o_p, o_t = (pb, tb) if p is pa else (pa, ta)
        for d, f in p.items():
            if d >= t.dim() - 2:
                continue
            od = d + o_t.dim() - t.dim()
            if 0 <= od < o_t.dim() - 2 and o_t.shape[od] != 1 and o_p.get(od) != f:
                raise Refuse("matmul batch dims padded differently")
    pads = {}
    for d, f in pa.items():
        if d == ka:
            continue
        pads[d + nd - ta.dim()] = f
    for d, f in pb.items():
        if d == kb:
            continue
        od = d + nd - tb.dim()
        if d < tb.dim() - 2 and od in pads and pads[od] != f:
            raise Refuse("matmul batch dims padded differently")
        pads[od] = f
    return PT(r, pads) if pads else r


def _reshape(ctx, x: PT, shape):
    """view/reshape: dims grouped by products; merged groups concatenate factors; splits must
    follow existing factor boundaries."""
    shape = [ctx.B * s.a + s.c if isinstance(s, Lin) else s for s in shape]
    r = x.t.reshape(shape)
    ins, outs = list(x.t.shape), list(r.shape)
    in_f = [x.pads.get(d, ((ins[d], None),)) for d in range(len(ins))]
    pads = {}
    i = j = 0
    while i < len(ins) or j < len(outs):
        gi, gj = [i], [j]
        pi = ins[i] if i < len(ins) else 1
        pj = outs[j] if j < len(outs) else 1
        while pi != pj:
            if pi < pj:
                i += 1
                gi.append(i)
                pi *= ins[i]
            else:
                j += 1
                gj.append(j)
                pj *= outs[j]
        i += 1
        j += 1
        gi = [d for d in gi if d < len(ins)]
        gj = [d for d in gj if d < len(outs)]
        factors = tuple(f for d in gi for f in in_f[d] if f[0] != 1)
        if not any(lin is not None for _, lin in factors):
            continue
        # Distribute factors over the output dims of the group.
        k = 0
        for od in gj:
            need, got = outs[od], []
            prod = 1
            while prod < need and k < len(factors):
                got.append(factors[k])
                prod *= factors[k][0]
                k += 1
            if prod != need:
                raise Refuse("view/reshape splits a padded dim")
            if _is_padded(got):
                pads[od] = tuple(got)
    return PT(r, pads) if pads else r


def _permute(x: PT, perm):
    nd = x.t.dim()
    perm = [p % nd for p in perm]
    r = x.t.permute(perm)
    return PT(r, {i: x.pads[p] for i, p in enumerate(perm) if p in x.pads})


def _transpose(x: PT, d0, d1):
    nd = x.t.dim()
    perm = list(range(nd))
    d0, d1 = d0 % nd, d1 % nd
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return _permute(x, perm)


def _getitem_tensor(ctx, x: PT, idx):
    if not isinstance(idx, tuple):
        idx = (idx,)
    if any(i is Ellipsis for i in idx):
        k = idx.index(Ellipsis)
        idx = idx[:k] + (slice(None),) * (x.t.dim() - (len(idx) - 1 - sum(i is None for i in idx))) + idx[k + 1:]
    out_idx, pads, d, od = [], {}, 0, 0
    for i in idx:
        if i is None:
            out_idx.append(None)
            od += 1
            continue
        f = x.pads.get(d)
        if isinstance(i, int):
            if f is not None:
                raise Refuse("integer index into a padded dim")
            out_idx.append(i)
            d += 1
            continue
        if not isinstance(i, slice) or isinstance(i, torch.Tensor):
            raise Refuse(f"index {type(i).__name__} on a padded tensor")
        if f is None:
            if any(isinstance(v, Lin) for v in (i.start, i.stop, i.step)):
                raise Refuse("symbolic slice of an unpadded dim")
            out_idx.append(i)
        else:
            if i.step not in (None, 1) or len(f) != 1:
                raise Refuse("strided slice or slice of a merged padded dim")
            size, lin = f[0]
            start, stop = i.start or 0, i.stop
            if isinstance(stop, Lin) and stop.a == lin.a:
                stop = stop.c - lin.c  # relative to the real end
                stop = None if stop == 0 else stop
            if isinstance(start, Lin) or isinstance(stop, Lin) or start < 0 or (stop is not None and stop > 0):
                raise Refuse("slice of a padded dim bounded by a constant (only x[k:], x[:-k] are exact)")
            k = start - (stop or 0)
            out_idx.append(slice(start, size + stop if stop else None))
            pads[od] = ((size - k, Lin(lin.a, lin.c - k)),)
        if d in x.pads and od not in pads:
            pads[od] = x.pads[d]
        d += 1
        od += 1
    for dd in range(d, x.t.dim()):
        if dd in x.pads:
            pads[od + dd - d] = x.pads[dd]
    r = x.t[tuple(out_idx)]
    return PT(r, pads) if pads else r


def _unsqueeze(x: PT, dim):
    nd = x.t.dim() + 1
    d = dim % nd
    return PT(x.t.unsqueeze(d), {(e + 1 if e >= d else e): f for e, f in x.pads.items()})


def _squeeze(x: PT, dim=None):
    if dim is None:
        dims = [d for d in range(x.t.dim()) if x.t.shape[d] == 1 and d not in x.pads]
    else:
        dims = [d % x.t.dim() for d in ([dim] if isinstance(dim, int) else dim)]
        dims = [d for d in dims if x.t.shape[d] == 1]
    if any(d in x.pads for d in dims):
        raise Refuse("squeeze of a padded dim")
    r = x.t.squeeze(tuple(dims)) if dims else x.t
    return PT(r, {e - sum(1 for d in dims if d < e): f for e, f in x.pads.items()})


def _cat(ctx, tensors, dim=0):
    """cat along a dim no operand pads; every operand padded alike elsewhere."""
    # PyTorch's legacy rule: 1-d empty operands are skipped (an empty KV cache's first update).
    ts = [t for t in tensors if not (isinstance(t, torch.Tensor) and t.dim() == 1 and t.numel() == 0)]
    if not ts:
        raise Refuse("cat of empty tensors only")
    if len(ts) == 1:  # a new tensor equal to the one operand left
        return PT(_val(ts[0]).clone(), _padded_dims(ts[0])) if isinstance(ts[0], PT) else ts[0].clone()
    nd = _val(ts[0]).dim()
    d = dim % nd
    pads = _padded_dims(ts[0])
    if d in pads or any(_padded_dims(t) != pads for t in ts):
        raise Refuse("cat along a padded dim, or of operands padded differently")
    return PT(torch.cat([_val(t) for t in ts], d), pads)


def _expand(ctx, x: PT, sizes):
    """expand: a padded dim keeps its size (-1, or the Lin it is); new dims are unpadded."""
    sizes = list(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else list(sizes)
    off = len(sizes) - x.t.dim()
    phys = []
    for i, v in enumerate(sizes):
        d = i - off
        f = x.pads.get(d) if d >= 0 else None
        if f is not None:
            if not (v == -1 or (isinstance(v, Lin) and len(f) == 1 and f[0][1] == v)):
                raise Refuse("expand of a padded dim to another size")
            phys.append(-1)
        elif isinstance(v, Lin):
            raise Refuse("expand of an unpadded dim to a symbolic size")
        else:
            phys.append(v)
    return PT(x.t.expand(phys), {d + off: f for d, f in x.pads.items()})


def _pad(ctx, x: PT, pad, mode="constant", value=None):
    """F.pad: a padded dim may grow at its end (x[..., T:T+k] = value: written at the true end,
    not after the bucket's padding); unpadded dims as PyTorch does."""
    nd = x.t.dim()
    if len(pad) % 2 or len(pad) // 2 > nd:
        raise Refuse("pad with an odd or too long pad list")
    grow = {}
    for i in range(len(pad) // 2):
        d = nd - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        if d in x.pads and (lo, hi) != (0, 0):
            f = x.pads[d]
            if mode != "constant" or lo != 0 or hi < 0 or len(f) != 1:
                raise Refuse("pad of a padded dim other than a constant at its end")
            grow[d] = hi
    r = F.pad(x.t, tuple(pad), mode=mode, value=value) if mode == "constant" else F.pad(x.t, tuple(pad), mode=mode)
    pads = dict(x.pads)
    fill = torch.full((), 0 if value is None else value, dtype=r.dtype, device=r.device)
    for d, k in grow.items():
        size, lin = x.pads[d][0]
        end = ctx.lin_value(lin)
        shape = [1] * nd
        shape[d] = -1
        idx = torch.arange(size + k, device=r.device).view(shape)
        r = torch.where((idx >= end) & (idx < end + k), fill, r)
        pads[d] = ((size + k, Lin(lin.a, lin.c + k)),)
    return PT(r, pads)


def _split(x: PT, size, dim=0):
    d = dim % x.t.dim()
    if d in x.pads:
        raise Refuse("split along a padded dim")
    return tuple(PT(p, x.pads) for p in torch.split(x.t, size, d))


def _embedding(ctx, fn, idx, weight, padding_idx=None, max_norm=None, norm_type=2.0,
               scale_grad_by_freq=False, sparse=False):
    if isinstance(weight, PT):
        raise Refuse("embedding with a padded weight")
    if max_norm is not None or scale_grad_by_freq:  # both read the (padded) indices' counts
        raise Refuse("embedding with max_norm or scale_grad_by_freq")
    args, kwargs = (padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse), {}
    if not isinstance(idx, PT):
        return fn(idx, weight, *args, **kwargs)
    m = ctx.mask(idx, list(idx.pads))
    safe = torch.where(m, idx.t, torch.zeros((), dtype=idx.t.dtype, device=idx.t.device))
    return PT(fn(safe, weight, *args, **kwargs), idx.pads)


def _norm_rowwise(fn, x, normalized_shape, *args, **kwargs):
    if not isinstance(x, PT):
        return fn(x, normalized_shape, *args, **kwargs)
    nd, k = x.t.dim(), len(normalized_shape)
    if any(d >= nd - k for d in x.pads):
        raise Refuse(f"{fn.__name__} over a padded dim")
    args = [_val(a) for a in args]
    kwargs = {kk: _val(v) for kk, v in kwargs.items()}
    return PT(fn(x.t, normalized_shape, *args, **kwargs), x.pads)


def _linear(x, w, b=None):
    if isinstance(w, PT) or isinstance(b, PT):
        raise Refuse("linear with a padded weight")
    if not isinstance(x, PT):
        return F.linear(x, w, b)
    if x.t.dim() - 1 in x.pads:
        raise Refuse("linear contracting a padded dim")
    return PT(F.linear(x.t, w, b), x.pads)


def _arange(ctx, *args, **kwargs):
    if not any(isinstance(a, Lin) for a in args):
        return torch.arange(*args, **kwargs)
    if len(args) == 2 and isinstance(args[0], int) and isinstance(args[1], Lin):  # arange(k, k + s)
        start = args[0]
        r = _arange(ctx, Lin(args[1].a, args[1].c - start), **kwargs)
        return PT(r.t + start, r.pads)
    if len(args) != 1 or not isinstance(args[0], Lin):
        raise Refuse("arange with a symbolic start or step")
    lin = args[0]
    size = lin.at(ctx.B)
    r = torch.arange(size, **kwargs)
    real = r < ctx.lin_value(lin)
    # Padded positions read 0: still a valid index (a position embedding sized to the real max).
    r = torch.where(real, r, torch.zeros((), dtype=r.dtype, device=r.device))
    return PT(r, {0: ((size, lin),)})


def _size(x, d=None):
    t = _val(x)
    if d is None:
        return tuple(x.pads[i][0][1] if isinstance(x, PT) and i in x.pads and len(x.pads[i]) == 1
                     else _dim_size(x, i) for i in range(t.dim()))
    return _dim_size(x, d % t.dim())


def _dim_size(x, d):
    if isinstance(x, PT) and d in x.pads:
        f = x.pads[d]
        lin = None
        mult = 1
        for size, l in f:
            if l is None:
                mult *= size
            elif lin is None:
                lin = l
            else:
                raise Refuse("size of a dim merging two padded dims")
        return Lin(lin.a * mult, lin.c * mult)
    return _val(x).shape[d]


def _lin_arith(op, a, b):
    if isinstance(a, Lin) and isinstance(b, int):
        pass
    elif isinstance(b, Lin) and isinstance(a, int) and op in (operator.add, operator.mul):
        a, b = b, a
    else:
        raise Refuse(f"symbolic size arithmetic {op.__name__}")
    if op is operator.add:
        return Lin(a.a, a.c + b)
    if op is operator.sub:
        return Lin(a.a, a.c - b)
    if op is operator.mul:
        return Lin(a.a * b, a.c * b)
    if op is operator.floordiv and a.a % b == 0 and a.c % b == 0:
        return Lin(a.a // b, a.c // b)
    raise Refuse(f"symbolic size arithmetic {op.__name__}")


# ----------------------------------------------------------------------------- interpreter


class PadInterpreter:
    """Runs a Dynamo graph on padded values. `env_in`: placeholder values (PT, tensor, int,
    Lin, baked scalars); `sym`: the padded sympy symbol."""

    def __init__(self, gm, sym, ctx: _Ctx, others: dict):
        self.gm, self.sym, self.ctx, self.others = gm, sym, ctx, others

    def run(self, inputs):
        env = {}
        it = iter(inputs)
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                env[node] = next(it)
                continue
            if node.op == "output":
                return torch.fx.node.map_arg(node.args[0], lambda n: env[n])
            args = torch.fx.node.map_arg(node.args, lambda n: env[n])
            kwargs = dict(torch.fx.node.map_arg(node.kwargs, lambda n: env[n]))
            try:
                out = self.step(node, args, kwargs)
            except Refuse as e:
                raise Refuse(f"{node.format_node()}: {e}") from None
            self.check(node, out)
            env[node] = out
        raise Refuse("graph without output")

    def check(self, node, out):
        """Padded dims == the dims whose symbolic size involves the padded symbol."""
        ev = node.meta.get("example_value")
        if isinstance(ev, torch.Tensor):
            t = _val(out)
            if not isinstance(t, torch.Tensor) or t.dim() != ev.dim():
                raise Refuse(f"{node.format_node()}: rule result does not match Dynamo's")
            pads = _padded_dims(out)
            for d, s in enumerate(ev.shape):
                sym_here = isinstance(s, torch.SymInt) and self.sym in s.node.expr.free_symbols
                if sym_here != (d in pads):
                    raise Refuse(f"{node.format_node()}: lost track of the padded dim {d}")
                if sym_here:
                    self.check_size(node, d, s, pads[d])
                if not sym_here:
                    want = s if isinstance(s, int) else int(s.node.expr.xreplace(self.others))
                    if int(t.shape[d]) != want:
                        raise Refuse(f"{node.format_node()}: dim {d} is {t.shape[d]}, expected {want}")

    def check_size(self, node, d, s, factors):
        """A padded dim's factors say the size Dynamo's expression says (a*s + c times the
        unpadded factors)."""
        import sympy

        mult, lins = 1, [lin for _, lin in factors if lin is not None]
        for size, lin in factors:
            if lin is None:
                mult *= size
        if len(lins) != 1:
            raise Refuse(f"{node.format_node()}: dim {d} merges two padded dims")
        want = sympy.expand(s.node.expr.xreplace(self.others))
        got = sympy.expand(mult * (lins[0].a * self.sym + lins[0].c))
        if sympy.expand(want - got) != 0:
            raise Refuse(f"{node.format_node()}: dim {d} tracked as {got}, Dynamo says {want}")

    def step(self, node, args, kwargs):
        ctx = self.ctx
        tgt = node.target
        touched = any(isinstance(a, (PT, Lin)) for a in _flat(args) + _flat(list(kwargs.values())))
        if node.op == "call_method":
            if tgt == "item":
                if isinstance(args[0], _BakedScalar):
                    return args[0].item()
                raise Refuse("item() in the graph")
            if not touched:
                return getattr(args[0], tgt)(*args[1:], **kwargs)
            x = args[0]
            if tgt in ("view", "reshape"):
                shape = args[1] if len(args) == 2 and isinstance(args[1], (tuple, list)) else args[1:]
                return _reshape(ctx, x, list(shape))
            if tgt in ("transpose",):
                return _transpose(x, *args[1:])
            if tgt == "permute":
                perm = args[1] if len(args) == 2 and isinstance(args[1], (tuple, list)) else args[1:]
                return _permute(x, perm)
            if tgt == "split":
                return _split(x, *args[1:], **kwargs)
            if tgt == "unsqueeze":
                return _unsqueeze(x, *args[1:], **kwargs)
            if tgt == "squeeze":
                return _squeeze(x, *args[1:], **kwargs)
            if tgt == "expand":
                return _expand(ctx, x, args[1:])
            if tgt == "size":
                return _size(x, *args[1:], **kwargs)
            if tgt in ("sum", "mean", "amax", "amin"):
                return _reduce(ctx, x, kwargs.get("dim", args[1] if len(args) > 1 else None),
                               kwargs.get("keepdim", args[2] if len(args) > 2 else False), tgt, kwargs.get("dtype"))
            if tgt in ("softmax", "log_softmax"):
                return _softmax(ctx, getattr(torch, tgt), x, *args[1:], **kwargs)
            if tgt == "cumsum":
                return _cumsum(ctx, x, *args[1:], **kwargs)
            if tgt in _ELEMENTWISE_METHODS:
                return _elementwise(ctx, lambda s, *a, **k: getattr(s, tgt)(*a, **k), args, kwargs)
            raise Refuse(f"no padding rule for method {tgt}")
        if node.op != "call_function":
            raise Refuse(f"{node.op} in a dynamic graph")
        if tgt is operator.getitem:
            x, i = args
            if isinstance(x, PT):
                return _getitem_tensor(ctx, x, i)
            if isinstance(x, (tuple, list)) and not isinstance(i, (PT, Lin)):
                return x[i]
        if not touched:
            return tgt(*args, **kwargs)
        if tgt in (operator.add, operator.sub, operator.mul, operator.floordiv) and not any(
                isinstance(a, (PT, torch.Tensor)) for a in args):
            return _lin_arith(tgt, *args)
        if tgt is torch.arange:
            return _arange(ctx, *args, **kwargs)
        if tgt in (torch.cat, torch.concat, torch.concatenate):
            return _cat(ctx, *args, **kwargs)
        if tgt in (F.pad, torch._C._nn.pad):
            return _pad(ctx, *args, **kwargs)
        if tgt is torch.unsqueeze:
            return _unsqueeze(*args, **kwargs)
        if tgt is torch.squeeze:
            return _squeeze(*args, **kwargs)
        if tgt in (F.embedding,):
            return _embedding(ctx, tgt, *args, **kwargs)
        if tgt in (F.layer_norm, F.rms_norm):
            return _norm_rowwise(tgt, *args, **kwargs)
        if tgt in (F.linear, torch._C._nn.linear):
            return _linear(*args, **kwargs)
        if tgt in (torch.matmul, operator.matmul, torch.bmm):
            return _contract(ctx, *args)
        if tgt in (F.scaled_dot_product_attention, torch._C._nn.scaled_dot_product_attention):
            return _sdpa(ctx, *args, **kwargs)
        if tgt in (F.cross_entropy, F.nll_loss):
            return _loss(ctx, tgt, *args, **kwargs)
        if tgt in (torch.sum, torch.mean, torch.amax, torch.amin):
            x = args[0]
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            keep = kwargs.get("keepdim", args[2] if len(args) > 2 else False)
            return _reduce(ctx, x, dim, keep, tgt.__name__, kwargs.get("dtype"))
        if tgt in (F.softmax, F.log_softmax, torch.softmax, torch.log_softmax):
            fn = torch.softmax if tgt in (F.softmax, torch.softmax) else torch.log_softmax
            dim = kwargs.pop("dim", None)
            if dim is None:
                dim = args[1]
            return _softmax(ctx, fn, args[0], dim, kwargs.get("dtype"))
        if tgt is torch.cumsum:
            return _cumsum(ctx, *args, **kwargs)
        if tgt is torch.transpose:
            return _transpose(*args)
        if tgt in (torch.permute,):
            return _permute(*args)
        if tgt in (torch.reshape,):
            return _reshape(ctx, args[0], list(args[1]))
        if tgt in (F.dropout,):
            p = kwargs.get("p", args[1] if len(args) > 1 else 0.5)
            training = kwargs.get("training", args[2] if len(args) > 2 else True)
            if p and training:
                raise Refuse("dropout (random) over a padded tensor")
            return args[0]
        if tgt in _ELEMENTWISE_FNS:
            return _elementwise(ctx, tgt, args, kwargs)
        raise Refuse(f"no padding rule for {getattr(tgt, '__name__', tgt)}")


def _flat(x) -> list:
    if isinstance(x, (list, tuple)):
        return [y for v in x for y in _flat(v)]
    if isinstance(x, dict):
        return _flat(list(x.values()))
    return [x]


class _BakedScalar:
    """A 0-dim CPU scalar input (an unspecialized float/int): its value is part of the key."""

    def __init__(self, v):
        self.v = v

    def item(self):
        return self.v
