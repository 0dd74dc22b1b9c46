"""FlexAttention on tpu: the `flex_attention` / `flex_attention_backward` higher-order ops for
the PrivateUse1 dispatch key (and AutocastPrivateUse1), computed by tpu ops.

`torch.nn.attention.flex_attention.flex_attention` accepts a fixed list of devices in
`_validate_device`; `install()` widens that list by "tpu" -- the one place torch_tpu changes
FlexAttention's Python -- and registers our kernels with the HOPs' `py_impl`, PyTorch's
extension point for a dispatch key. Eagerly, FlexAttention wraps the HOP in a
`torch.compile(backend="eager")` of its own (Dynamo turns `score_mod` / `mask_mod` into FX
graphs); under `torch.compile(backend="tpu")` AOTAutograd records the HOPs as graph nodes and
our capture runs these kernels on tpu tensors, so the mods become part of the one IR graph.

What the kernels compute (the semantics of the Triton kernel, not of torch's dense CPU path,
which ignores the block structure): a key block of a query block is attended only if the
BlockMask lists it, among the partial blocks (`kv_indices[:kv_num_blocks]`, where `mask_mod`
decides per element) or the full ones (`full_kv_indices[:full_kv_num_blocks]`, all elements,
`mask_mod` not called). Scores are `q @ k^T * scale` in float32 (float64 for float64 inputs),
then `score_mod` (vmapped over b, h, q_idx, kv_idx), the mask, a softmax whose fully masked
rows are 0 (their logsumexp is -inf), and `probs.to(q.dtype) @ v`. GQA groups query heads
over their key/value head without repeating k and v. The backward recomputes the scores and
differentiates `score_mod` through the joint graph the autograd HOP traced.

Today the scores of a call are materialized ([B, Hq, L, S] float32) and masked blocks are
computed and then discarded: block sparsity is honoured in the result, not yet in the cost
(docs/decisions/flex-attention.md)."""
from __future__ import annotations

import functools
import math

import torch
from torch._C import DispatchKey

_LN2 = math.log(2.0)
_EMPTY_BLOCK = 1 << 30  # torch's _LARGE_SPARSE_BLOCK_SIZE: the block size of the default BlockMask
_installed = False
_calls = {"forward": 0, "backward": 0}


def stats() -> dict:
    """Calls of the tpu FlexAttention kernels (forward, backward) in this process."""
    return dict(_calls)


# --- the block structure ------------------------------------------------------------------
def _block_map(num: torch.Tensor | None, idx: torch.Tensor | None, nkv: int) -> torch.Tensor | None:
    """[Bm, Hm, Qb, nkv] bool: key block j is listed among the first num[b, h, i] entries of
    idx[b, h, i, :] (a BlockMask's kv_num_blocks / kv_indices pair)."""
    if num is None or idx is None:
        return None
    width = idx.shape[-1]
    valid = torch.arange(width, device=idx.device, dtype=torch.int32) < num.unsqueeze(-1)
    hit = idx.unsqueeze(-1) == torch.arange(nkv, device=idx.device, dtype=idx.dtype)
    return (hit & valid.unsqueeze(-1)).any(-2)


def _element_rows(bmap: torch.Tensor, L: int, S: int, qbs: int, kvbs: int) -> torch.Tensor:
    """A block map [Bm, Hm, Qb, KVb] expanded to elements [Bm, Hm, L, S]."""
    dev = bmap.device
    qb = torch.clamp(torch.arange(L, device=dev) // qbs, max=bmap.shape[-2] - 1)
    kb = torch.clamp(torch.arange(S, device=dev) // kvbs, max=bmap.shape[-1] - 1)
    return bmap.index_select(-2, qb).index_select(-1, kb)


def _graph_ops(fn):
    """The computing nodes of a mod's FX graph (Dynamo's GraphModule of it), None if not a graph."""
    g = getattr(fn, "graph", None)
    return None if g is None else [n for n in g.nodes if n.op not in ("placeholder", "output")]


def _is_noop_mask(mask_mod) -> bool:
    from torch.nn.attention.flex_attention import noop_mask

    if mask_mod is noop_mask:
        return True
    ops = _graph_ops(mask_mod)
    # Dynamo's graph of noop_mask: new_ones(size=(), dtype=bool) returned as it is.
    return (ops is not None and len(ops) == 1 and ops[0].op == "call_method" and ops[0].target == "new_ones"
            and ops[0].kwargs.get("dtype") is torch.bool and tuple(ops[0].kwargs.get("size", (None,))) == ())


def _is_identity_score_mod(score_mod) -> bool:
    from torch.nn.attention.flex_attention import _identity

    if score_mod is _identity:
        return True
    if _graph_ops(score_mod) != []:  # not a graph, or one that computes something
        return False
    places = [n for n in score_mod.graph.nodes if n.op == "placeholder"]
    (out,) = [n for n in score_mod.graph.nodes if n.op == "output"]
    ret = out.args[0]
    if isinstance(ret, (tuple, list)):
        ret = ret[0] if len(ret) == 1 else None
    return bool(places) and ret is places[0]  # returns its score argument unchanged


def _mask(block_mask: tuple, B: int, Hq: int, L: int, S: int, device, mask_mod_other_buffers: tuple):
    """The [B|1, Hq|1, L, S] bool mask a BlockMask tuple describes, or None (nothing masked)."""
    from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex
    from torch.nn.attention.flex_attention import _vmap_for_bhqkv

    kv_num, kv_idx, full_num, full_idx = block_mask[2], block_mask[3], block_mask[4], block_mask[5]
    qbs, kvbs, mask_mod = block_mask[-3], block_mask[-2], block_mask[-1]
    if full_num is None and qbs == kvbs == _EMPTY_BLOCK and kv_idx.shape[-2:] == (1, 1) and _is_noop_mask(mask_mod):
        return None  # flex_attention's own default BlockMask: one block listed, covering everything
    nkv = max(1, -(-S // kvbs))
    partial = _block_map(kv_num, kv_idx, nkv)
    full = _block_map(full_num, full_idx, nkv)
    keep = None
    if partial is not None:
        keep = _element_rows(partial, L, S, qbs, kvbs)
        if not _is_noop_mask(mask_mod):
            b = torch.arange(B, device=device)
            h = torch.arange(Hq, device=device)
            m = torch.arange(L, device=device)
            n = torch.arange(S, device=device)
            fn = _vmap_for_bhqkv(mask_mod, prefix=(), suffix=(None,) * len(mask_mod_other_buffers))
            with TransformGetItemToIndex():
                elem = fn(b, h, m, n, *mask_mod_other_buffers)
            keep = keep & elem
    if full is not None:
        f = _element_rows(full, L, S, qbs, kvbs)
        keep = f if keep is None else keep | f
    return keep


# --- forward ------------------------------------------------------------------------------
def _check(query, key, value, block_mask):
    B, Hq, L, D = query.shape
    Bkv, Hkv, S, Dv = value.shape
    if key.shape[:3] != (Bkv, Hkv, S) or key.shape[-1] != D:
        raise ValueError(f"[flex_attention] key must be [B, Hkv, S, E] matching value and query; got key "
                         f"{tuple(key.shape)}, value {tuple(value.shape)}, query {tuple(query.shape)}")
    if Hq % Hkv:
        raise ValueError(f"[flex_attention] query heads must be a multiple of key/value heads; got Hq={Hq}, Hkv={Hkv}")
    if Bkv not in (1, B):
        raise ValueError(f"[flex_attention] key/value batch must be 1 or the query's; got {Bkv}, expected 1 or {B}")
    for name, t in (("kv_num_blocks", block_mask[2]), ("kv_indices", block_mask[3])):
        if isinstance(t, torch.Tensor) and t.device != query.device:
            raise RuntimeError(f"[flex_attention] the BlockMask's {name} is on {t.device}; expected {query.device}, "
                               "the device of q/k/v (create_block_mask(..., device=q.device))")
    return B, Hq, L, D, Bkv, Hkv, S, Dv


def _grouped(t: torch.Tensor, B: int, Hkv: int) -> torch.Tensor:
    """[B, Hq, L, E] as [B, Hkv, G*L, E]: query heads h = hkv*G + g share key/value head hkv."""
    return t.reshape(B, Hkv, -1, t.shape[-1])


def _scores(query, key, B, Hq, L, S, Hkv, scale, wp):
    q = _grouped(query.to(wp), B, Hkv)
    k = key.to(wp).expand(B, -1, -1, -1)
    return (q @ k.transpose(-2, -1)).view(B, Hq, L, S) * scale


def _apply_score_mod(score_mod, s, buffers):
    from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex
    from torch.nn.attention.flex_attention import _vmap_for_bhqkv

    B, H, L, S = s.shape
    dev = s.device
    fn = _vmap_for_bhqkv(score_mod, prefix=(0,), suffix=(None,) * len(buffers))
    with TransformGetItemToIndex():
        return fn(s, torch.arange(B, device=dev), torch.arange(H, device=dev), torch.arange(L, device=dev),
                  torch.arange(S, device=dev), *buffers).to(s.dtype)


def flex_attention_tpu(query, key, value, score_mod, block_mask, scale, kernel_options,
                       score_mod_other_buffers=(), mask_mod_other_buffers=()):
    from torch._higher_order_ops.flex_attention import _permute_strides

    _calls["forward"] += 1
    B, Hq, L, D, Bkv, Hkv, S, Dv = _check(query, key, value, block_mask)
    wp = torch.float64 if query.dtype == torch.float64 else torch.float32
    s = _scores(query, key, B, Hq, L, S, Hkv, scale, wp)
    if not _is_identity_score_mod(score_mod):
        s = _apply_score_mod(score_mod, s, score_mod_other_buffers)
    keep = _mask(block_mask, B, Hq, L, S, query.device, mask_mod_other_buffers)
    if keep is not None:
        s = torch.where(keep, s, torch.full((), -math.inf, dtype=wp, device=s.device))
    mx = s.amax(-1, keepdim=True)
    shift = torch.where(mx == -math.inf, torch.zeros((), dtype=wp, device=s.device), mx)
    e = torch.exp(s - shift)
    total = e.sum(-1, keepdim=True)
    lse = (torch.log(total) + shift).squeeze(-1)  # -inf on fully masked rows
    p = e / torch.where(total == 0, torch.ones((), dtype=wp, device=s.device), total)
    v = value.to(query.dtype).expand(B, -1, -1, -1)
    out = (_grouped(p.to(query.dtype), B, Hkv) @ v).view(B, Hq, L, Dv)
    out = _permute_strides(out, query.stride())
    return out, lse / _LN2, mx.squeeze(-1) / _LN2


# --- backward -----------------------------------------------------------------------------
def flex_attention_backward_tpu(query, key, value, out, logsumexp, grad_out, grad_logsumexp, fw_graph,
                                joint_graph, block_mask, scale, kernel_options, score_mod_other_buffers=(),
                                mask_mod_other_buffers=()):
    from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex
    from torch._higher_order_ops.flex_attention import (
        _new_captured_grad_buffers,
        _permute_strides,
        create_fw_bw_graph,
    )
    from torch.nn.attention.flex_attention import _vmap_for_bhqkv

    _calls["backward"] += 1
    if query.dtype != key.dtype or query.dtype != value.dtype:
        raise ValueError(f"[flex_attention] backward needs one dtype for q, k, v; got {query.dtype}, "
                         f"{key.dtype}, {value.dtype}")
    B, Hq, L, D, Bkv, Hkv, S, Dv = _check(query, key, value, block_mask)
    wp = torch.float64 if query.dtype == torch.float64 else torch.float32
    identity = _is_identity_score_mod(fw_graph)
    nbuf = len(score_mod_other_buffers)
    if not identity and joint_graph is None:
        example = (query.new_zeros((), requires_grad=True),) + tuple(query.new_zeros((), dtype=torch.int) for _ in range(4))
        _, joint_graph = create_fw_bw_graph(fw_graph, example, score_mod_other_buffers)
    if grad_out is None:
        grad_out = torch.zeros_like(out)
    raw = _scores(query, key, B, Hq, L, S, Hkv, scale, wp)
    s = raw if identity else _apply_score_mod(fw_graph, raw, score_mod_other_buffers)
    keep = _mask(block_mask, B, Hq, L, S, query.device, mask_mod_other_buffers)
    zero = torch.zeros((), dtype=wp, device=s.device)
    lse = (logsumexp * _LN2).to(wp).unsqueeze(-1)
    p = torch.exp(s - torch.where(lse == -math.inf, zero, lse))
    p = torch.where(lse == -math.inf, zero, p)
    if keep is not None:
        p = torch.where(keep, p, zero)
    k = key.expand(B, -1, -1, -1)
    v = value.expand(B, -1, -1, -1)
    go = _grouped(grad_out.to(query.dtype), B, Hkv)
    dv = _grouped(p.to(query.dtype), B, Hkv).transpose(-2, -1) @ go  # [B, Hkv, S, Dv]
    dp = (go.to(wp) @ v.to(wp).transpose(-2, -1)).view(B, Hq, L, S)
    delta = (out.to(wp) * grad_out.to(wp)).sum(-1, keepdim=True)
    ds = p * (dp - delta)
    if grad_logsumexp is not None:
        ds = ds + p * (grad_logsumexp.to(wp) / _LN2).unsqueeze(-1)
    buffer_grads = ()
    if not identity:
        dims = [0, None, None, None, None] + [None] * nbuf
        fn = _vmap_for_bhqkv(joint_graph, prefix=(0,), suffix=(0,) + (None,) * nbuf, out_dims=dims)
        dev = s.device
        with TransformGetItemToIndex():
            ds, _, _, _, _, *buffer_grads = fn(raw, torch.arange(B, device=dev), torch.arange(Hq, device=dev),
                                                torch.arange(L, device=dev), torch.arange(S, device=dev), ds,
                                                *score_mod_other_buffers)
    ds = (ds * scale).to(query.dtype)
    if keep is not None:
        ds = torch.where(keep, ds, torch.zeros((), dtype=ds.dtype, device=ds.device))
    dsg = _grouped(ds, B, Hkv)
    dq = (dsg @ k).view(B, Hq, L, D)
    dk = dsg.transpose(-2, -1) @ _grouped(query, B, Hkv)  # [B, Hkv, S, D]
    if Bkv == 1 and B > 1:
        dk, dv = dk.sum(0, keepdim=True), dv.sum(0, keepdim=True)
    dq = _permute_strides(dq, query.stride())
    dk = _permute_strides(dk, key.stride())
    dv = _permute_strides(dv, value.stride())
    grads = []
    if nbuf:
        for dst, g in zip(_new_captured_grad_buffers(score_mod_other_buffers, joint_graph), buffer_grads):
            grads.append(dst.copy_(g) if isinstance(g, torch.Tensor) and dst is not None else None)
    return dq, dk, dv, tuple(grads)


# --- autocast -----------------------------------------------------------------------------
def _autocast_forward(query, key, value, score_mod, block_mask, scale, kernel_options,
                      score_mod_other_buffers=(), mask_mod_other_buffers=()):
    """AutocastPrivateUse1: q, k, v cast to the autocast dtype (as the CUDA/CPU entries do),
    then the op below autocast."""
    from torch._higher_order_ops.flex_attention import flex_attention

    dtype = torch.get_autocast_dtype("tpu")

    def cast(t):
        return t.to(dtype) if t.is_floating_point() and t.dtype != torch.float64 else t

    with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(DispatchKey.AutocastPrivateUse1)):
        return flex_attention(cast(query), cast(key), cast(value), score_mod, block_mask, scale, kernel_options,
                              score_mod_other_buffers, mask_mod_other_buffers)


# --- installation -------------------------------------------------------------------------
def _widen_validate_device(mod) -> None:
    """FlexAttention's device allow-list, widened by "tpu" (forward and backward allowed)."""
    orig = mod._validate_device
    if getattr(orig, "_torch_tpu", False):
        return

    def _validate_device(query, key, value):
        if query.device.type == "tpu":
            for name, t in (("key", key), ("value", value)):
                if t.device != query.device:
                    raise ValueError(f"[flex_attention] {name} is on {t.device}; expected {query.device}, the query's device")
            return None
        return orig(query, key, value)

    _validate_device._torch_tpu = True
    mod._validate_device = _validate_device


def _untraceable(e: BaseException) -> bool:
    """An error of Dynamo or vmap meaning a mod does data-dependent Python control flow."""
    import torch._dynamo.exc as dexc

    text = str(e)
    return isinstance(e, (dexc.UserError, dexc.Unsupported)) or "data-dependent" in text or "data dependent" in text


def _on_tpu(*ts) -> bool:
    return any(isinstance(t, torch.Tensor) and t.device.type == "tpu" for t in ts)


def _name_errors(mod) -> None:
    """flex_attention / create_block_mask on tpu: a score_mod or mask_mod that cannot be traced
    (Python control flow on a tensor's value, .item()) raises an error that names FlexAttention
    and the mod, the original as its cause. Under Dynamo both run as they are."""
    orig_fa, orig_cbm = mod.flex_attention, mod.create_block_mask
    if getattr(orig_fa, "_torch_tpu", False):
        return

    @functools.wraps(orig_fa)
    def flex_attention(query, key, value, *args, **kwargs):
        if torch.compiler.is_dynamo_compiling() or not _on_tpu(query):
            return orig_fa(query, key, value, *args, **kwargs)
        try:
            return orig_fa(query, key, value, *args, **kwargs)
        except Exception as e:
            if not _untraceable(e):
                raise
            raise RuntimeError("[flex_attention] score_mod / mask_mod could not be traced on tpu; got Python "
                               "control flow on a tensor value (if/bool()/.item() on q_idx, kv_idx, ...), expected "
                               "tensor ops only (torch.where for choices): " + str(e).split("\n")[0]) from e

    @functools.wraps(orig_cbm)
    def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device=None, *args, **kwargs):
        dev = torch.device(device) if device is not None else torch.get_default_device()
        if torch.compiler.is_dynamo_compiling() or dev.type != "tpu":
            return orig_cbm(mask_mod, B, H, Q_LEN, KV_LEN, device, *args, **kwargs)
        try:
            return orig_cbm(mask_mod, B, H, Q_LEN, KV_LEN, device, *args, **kwargs)
        except Exception as e:
            if not _untraceable(e):
                raise
            name = getattr(mask_mod, "__name__", type(mask_mod).__name__)
            raise RuntimeError(f"[flex_attention] create_block_mask could not evaluate mask_mod {name!r} on tpu; got "
                               "Python control flow on a tensor value (if/bool()/.item()), expected tensor ops only "
                               "(& | ~ and comparisons): " + str(e).split("\n")[0]) from e

    flex_attention._torch_tpu = True
    mod.flex_attention, mod.create_block_mask = flex_attention, create_block_mask


def install(module=None) -> None:
    """Registers the tpu kernels with the FlexAttention HOPs and widens its device check
    (idempotent; runs when torch.nn.attention.flex_attention is first imported)."""
    global _installed
    if _installed:
        return
    import torch.nn.attention.flex_attention as fa
    from torch._higher_order_ops.flex_attention import flex_attention, flex_attention_backward

    _widen_validate_device(fa)
    _name_errors(fa)
    if DispatchKey.PrivateUse1 not in flex_attention.py_kernels:
        flex_attention.py_impl(DispatchKey.PrivateUse1)(flex_attention_tpu)
    if DispatchKey.PrivateUse1 not in flex_attention_backward.py_kernels:
        flex_attention_backward.py_impl(DispatchKey.PrivateUse1)(flex_attention_backward_tpu)
    if DispatchKey.AutocastPrivateUse1 not in flex_attention.py_kernels:
        flex_attention.py_impl(DispatchKey.AutocastPrivateUse1)(_autocast_forward)
    _installed = True
