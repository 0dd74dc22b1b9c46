"""Mutations of a base call's CPU arguments. Each is drawn from the call's own random stream
and leaves a tag (the known-failures list matches on tags):

  layout:transpose|step|offset   same values, another layout (non-contiguous, offset)
  layout:expand|overlap          stride-0 / overlapping views (values change: both devices
                                 get the same view)
  special:nan|inf|negzero|max|tiny|subnormal|intmax|oob   NaN/Inf/extremes; out-of-range ints
  mixdtype:<dtype>               one tensor cast to another dtype (type promotion)
  size0 / size1                  every dim of one size narrowed to 0 or 1 (all operands alike)
  invalid:dim|rank|shape         an int argument made out of range, an extra dim, a mismatch
  pyscalar                       a one-element tensor argument passed as a Python number
"""
import math
import re

import torch
from torch.utils import _pytree as pytree

MIX_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.bool)

# Ops whose results depend on the order of equal elements (unspecified on every device):
# value-changing mutations (duplicates, NaN) are not applied to them.
ORDER_SENSITIVE = ("sort", "argsort", "topk", "kthvalue", "mode", "median", "nanmedian", "msort",
                   "unique", "unique_consecutive", "searchsorted", "bucketize", "histc")
# Ops whose CPU reference is itself unreliable for some inputs, so those inputs are not drawn:
# linear algebra on arbitrary values is ill-conditioned (OpInfo's samples are built to be
# well-conditioned); CPU's Welford mean turns an Inf into NaN depending on where it sits
# (var_mean([inf, 1, 2]) has mean NaN on CPU).
ILL_CONDITIONED = ("linalg.", "cholesky", "inverse", "pinv", "det", "slogdet", "solve", "lu", "qr", "svd",
                   "eig", "lstsq", "matrix_exp", "matrix_power", "geqrf", "ormqr", "householder", "triangular",
                   "logdet", "cond", "norm.nuc", "pca", "tensorinv", "tensorsolve")
WELFORD = ("var", "std", "batch_norm", "instance_norm", "group_norm", "layer_norm")
# Ops that write through an index tensor: duplicate indices make the result order-dependent,
# so index tensors get no duplicating views (out-of-range values are still drawn).
SCATTER_LIKE = ("scatter", "index_put", "index_copy", "index_add", "index_reduce", "put", "take_along",
                "masked_scatter", "_unsafe_index_put", "index_fill")


def _has(name, words):
    """Whether a component of `name` (split at '.' and '_') starts one of `words`."""
    return re.search(r"(^|[._])(" + "|".join(re.escape(w) for w in words) + ")", name) is not None


def _random(shape, dtype, gen):
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen).to(dtype)
    lo = 0 if dtype == torch.uint8 else -5
    return torch.randint(lo, 6, shape, generator=gen).to(dtype)


def relayout(t, kind, rng, gen):
    """A view of a fresh CPU base with t's shape and (same-value kinds) t's values."""
    shape = tuple(t.shape)
    if kind == "transpose" and t.dim() >= 2:
        perm = list(range(t.dim()))
        rng.shuffle(perm)
        if perm == sorted(perm):
            perm[-1], perm[-2] = perm[-2], perm[-1]
        inv = [perm.index(i) for i in range(t.dim())]
        return t.permute(perm).contiguous().permute(inv)
    if kind == "step" and t.dim() >= 1:
        d = rng.randrange(t.dim())
        big = list(shape)
        big[d] = 2 * big[d]
        base = _random(big, t.dtype, gen)
        view = base[(slice(None),) * d + (slice(0, None, 2),)]
        view.copy_(t)
        return view
    if kind == "offset":
        k = rng.randint(1, 5)
        base = _random((t.numel() + k,), t.dtype, gen)
        base[k:] = t.reshape(-1)
        return base[k:].view(shape)
    if kind == "expand" and any(s > 1 for s in shape):
        d = rng.choice([i for i, s in enumerate(shape) if s > 1])
        return t.narrow(d, 0, 1).expand(shape)
    if kind == "overlap" and t.dim() >= 1 and t.numel() > 1:
        strides = [rng.choice((0, 1, 1, 2)) for _ in shape]
        size = 1 + sum((s - 1) * st for s, st in zip(shape, strides))
        return _random((size,), t.dtype, gen).as_strided(shape, strides)
    return None


def _specials(t, elementwise, rng, tags, no_inf=False):
    """Writes 1-3 special values into a contiguous copy of t (returned)."""
    t = t.contiguous().clone()
    flat = t.view(-1)
    if t.dtype.is_floating_point:
        fi = torch.finfo(t.dtype)
        pool = [("nan", math.nan), ("negzero", -0.0)] + ([] if no_inf else [("inf", math.inf), ("inf", -math.inf)])
        if elementwise:
            pool += [("max", fi.max), ("max", -fi.max), ("tiny", fi.tiny), ("subnormal", fi.tiny / 4)]
    elif t.dtype == torch.bool:
        return None
    else:
        ii = torch.iinfo(t.dtype)
        pool = [("oob", min(ii.max, 1 << 20)), ("oob", max(ii.min, -(1 << 20)))]
        if elementwise:
            pool += [("intmax", ii.max), ("intmax", ii.min)]
    for _ in range(rng.randint(1, 3)):
        tag, v = rng.choice(pool)
        flat[rng.randrange(flat.numel())] = v
        tags.add(f"special:{tag}")
    return t


def mutate(call, rng, gen):
    """Mutates call.args/kwargs in place; returns the sorted tags."""
    tags = set(call.tags)
    leaves, spec = pytree.tree_flatten((call.args, call.kwargs))
    tensor_ix = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
    name = call.name
    elementwise = "elementwise" in call.tags
    order = _has(name, ORDER_SENSITIVE)
    scatter = _has(name, SCATTER_LIKE)
    fixed_values = _has(name, ILL_CONDITIONED)  # no value-changing mutation at all
    welford = _has(name, WELFORD)
    if tensor_ix and rng.random() < 0.15:  # 0- and 1-size dims, alike in every operand
        sizes = sorted({s for i in tensor_ix for s in leaves[i].shape if s > 1})
        if sizes:
            old, new = rng.choice(sizes), rng.choice((0, 1))
            for i in tensor_ix:
                for d, s in enumerate(leaves[i].shape):
                    if s == old:
                        leaves[i] = leaves[i].narrow(d, 0, new)
            tags.add(f"size{new}")
    if tensor_ix and rng.random() < 0.3:
        for i in tensor_ix:
            t = leaves[i]
            if t.numel() and rng.random() < 0.5 and not (order and t.is_floating_point()) and not fixed_values:
                if not t.is_floating_point() and t.dtype != torch.bool and rng.random() > 0.3:
                    continue  # integer tensors are often indices: out-of-range only sometimes
                s = _specials(t, elementwise, rng, tags, no_inf=welford)
                if s is not None:
                    leaves[i] = s
    if tensor_ix and rng.random() < 0.12:
        i = rng.choice(tensor_ix)
        dt = rng.choice([d for d in MIX_DTYPES if d != leaves[i].dtype])
        leaves[i] = leaves[i].to(dt)
        tags.add(f"mixdtype:{str(dt)[6:]}")
    if rng.random() < 0.08:
        _invalid(leaves, tensor_ix, rng, tags)
    if len(tensor_ix) > 1 and rng.random() < 0.1:
        i = rng.choice(tensor_ix[1:])
        if leaves[i].dim() == 0:
            leaves[i] = leaves[i].item()
            tags.add("pyscalar")
            tensor_ix = [j for j in tensor_ix if j != i]
    for i in tensor_ix:
        if rng.random() < 0.4:
            kinds = ["transpose", "step", "step", "offset"]
            value_ok = not (order or fixed_values or (scatter and not leaves[i].is_floating_point()))
            if value_ok and call.variant != "inplace":
                kinds += ["expand", "overlap"]
            kind = rng.choice(kinds)
            v = relayout(leaves[i], kind, rng, gen)
            if v is not None:
                leaves[i] = v
                tags.add(f"layout:{kind}")
    call.args, call.kwargs = pytree.tree_unflatten(leaves, spec)
    return sorted(tags)


def _invalid(leaves, tensor_ix, rng, tags):
    ints = [i for i, x in enumerate(leaves) if type(x) is int]
    r = rng.random()
    if ints and r < 0.4:
        i = rng.choice(ints)
        leaves[i] = rng.choice((7, -8, 100, -1 - abs(leaves[i]) * 3))
        tags.add("invalid:dim")
    elif tensor_ix and r < 0.7:
        i = rng.choice(tensor_ix)
        leaves[i] = leaves[i].unsqueeze(0).expand((2,) + tuple(leaves[i].shape)).contiguous()
        tags.add("invalid:rank")
    elif tensor_ix:
        i = rng.choice(tensor_ix)
        t = leaves[i]
        if t.dim() and t.shape[-1] > 1:
            leaves[i] = t.narrow(-1, 0, t.shape[-1] - 1)
            tags.add("invalid:shape")


def describe(args, kwargs):
    """One line: each argument's dtype, shape, strides and offset (tensors) or value."""
    def one(x):
        if isinstance(x, torch.Tensor):
            s = f"{str(x.dtype)[6:]}{list(x.shape)}"
            if not x.is_contiguous() or x.storage_offset():
                s += f"@{tuple(x.stride())}+{x.storage_offset()}"
            if x.device.type != "cpu":
                s += f"({x.device})"
            return s
        if isinstance(x, (list, tuple)):
            inner = ", ".join(one(v) for v in x)
            return f"[{inner}]" if isinstance(x, list) else f"({inner})"
        r = repr(x)
        return r if len(r) <= 60 else r[:57] + "..."
    parts = [one(a) for a in args] + [f"{k}={one(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)
