"""PyTorch's own decompositions (torch._decomp.decomposition_table) as tpu kernels for the aten
ops that have no C++ lowering: each runs as a sequence of ops that are lowered (so it executes
on tpu), and an op that a C++ family file lowers is never touched (checked at install time, so
adding a lowering in csrc/lowering/from_aten/ silently replaces the decomposition).

These are Python kernels: slower to dispatch than a C++ lowering, and meant as the long tail.
A decomposition that ends in the op itself (a torch._refs elementwise ref whose prim maps back
to the aten op) raises the usual "has no tpu lowering" NotImplementedError, or runs on CPU
under cpu_fallback_mode. Calls are counted in torch_tpu.metrics()["decompositions"].
TORCH_TPU_DECOMPOSITIONS=0 disables them (read once, at import).
"""
import inspect
import math
import os
import threading
import warnings

import torch
from torch.utils import _pytree as pytree

_lib = None
_tls = threading.local()
_counts = {}
_warned = set()


def counts():
    """{aten op name: calls} of decompositions run so far."""
    return dict(_counts)


def _fallback_enabled():
    from torch_tpu import _C

    prev = _C._set_cpu_fallback(False)
    _C._set_cpu_fallback(prev)
    return prev


def _cpu_fallback(op, name, args, kwargs):
    if not _fallback_enabled():
        raise NotImplementedError(
            f"[{name}] has no tpu lowering (its decomposition calls the op itself); run it under "
            "torch_tpu.cpu_fallback_mode() or set TORCH_TPU_CPU_FALLBACK=1 to run it on CPU")
    if name not in _warned:
        _warned.add(name)
        warnings.warn(f"[{name}] has no tpu lowering; running it on CPU (cpu_fallback_mode).")
    tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    dev = tensors[0].device if tensors else None
    copies = {}

    def to_cpu(x):
        if isinstance(x, torch.Tensor):
            copies[id(x)] = (x, x.cpu())
            return copies[id(x)][1]
        return x

    out = op(*pytree.tree_map(to_cpu, args), **pytree.tree_map(to_cpu, kwargs))
    if op._schema.is_mutable:  # in-place / out=: write the CPU results back
        for orig, cpu in copies.values():
            orig.copy_(cpu)
    back = {id(cpu): orig for orig, cpu in copies.values()}
    return pytree.tree_map(
        lambda x: back.get(id(x), x.to(dev)) if isinstance(x, torch.Tensor) else x, out)


def _kernel(op, fn):
    name = op.name()

    def kernel(*args, **kwargs):
        active = _tls.__dict__.setdefault("active", set())
        if name in active:
            return _cpu_fallback(op, name, args, kwargs)
        active.add(name)
        try:
            out = fn(*args, **kwargs)
        finally:
            active.discard(name)
        if out is NotImplemented:
            raise NotImplementedError(f"[{name}] has no tpu lowering; its decomposition does not cover these arguments")
        _counts[name] = _counts.get(name, 0) + 1
        return out

    return kernel


def _out_names(op):
    return [a.name for a in op._schema.arguments if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]


def _with_out(op, fn):
    """`fn` for an out= overload: the table maps some .out/.grad_input overloads to the
    functional decomposition, which doesn't take the out arguments; write its results into them.
    An out_wrapper'd decomposition (out optional) also runs functionally: under a dtype-casting
    wrapper such as pw_cast_for_opmath it would write a bf16/f16 `out` into an upcast copy and
    leave `out` itself unwritten. Only a decomposition that requires its out arguments gets them."""
    outs = _out_names(op)
    if not outs:
        return fn
    try:
        params = inspect.signature(fn).parameters
        if all(n in params and params[n].default is inspect.Parameter.empty for n in outs):
            return fn
    except (TypeError, ValueError):
        pass

    # A factory (no tensor inputs: linspace, logspace, ...) computes in its out's dtype, as the
    # out= overload does on CPU (logspace(0, 1.2, 2, out=int64) is [1, 10], not [1, 15]).
    factory = not any(isinstance(a.type, torch.TensorType) for a in op._schema.arguments if a.name not in outs)
    try:
        takes_dtype = "dtype" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        takes_dtype = False

    def out_fn(*args, **kwargs):
        dsts = [kwargs.pop(n) for n in outs]
        if factory and takes_dtype and kwargs.get("dtype") is None:
            kwargs["dtype"] = dsts[0].dtype
        res = fn(*args, **kwargs)
        res = res if isinstance(res, (tuple, list)) else (res,)
        for d, r in zip(dsts, res):
            if d.shape != r.shape:
                d.resize_(r.shape)
            d.copy_(r)
        return dsts[0] if len(dsts) == 1 else tuple(dsts)

    return out_fn


def _overload_name(op):
    base = op._schema.name.split("::", 1)[1]
    return base if op._overloadname == "default" else f"{base}.{op._overloadname}"


def install():
    """Registers the decompositions at PrivateUse1 (once)."""
    global _lib
    if _lib is not None or os.environ.get("TORCH_TPU_DECOMPOSITIONS", "1") == "0":
        return
    from torch._decomp import decomposition_table

    from torch_tpu._internal import ctc_loss, embedding_bag, fft, fused_adam, poisson, rnn_cells, unique, upsample_grad

    # Our own decompositions: ops PyTorch has none for, and fixes of PyTorch's for tpu inputs.
    own = {**rnn_cells.table(), **upsample_grad.table(), **unique.table(), **embedding_bag.table(),
           **fused_adam.table(), **ctc_loss.table(), **poisson.table(), **fft.table(), **_fixes()}
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    _lib = torch.library.Library("aten", "IMPL")
    for op, fn in decomposition_table.items():
        if not isinstance(op, torch._ops.OpOverload) or op.namespace != "aten" or op in own:
            continue
        name = op.name()
        # Only ops that would reach the fallback: no tpu kernel and no composite kernel.
        if any(has(name, k) for k in ("PrivateUse1", "CompositeImplicitAutograd", "CompositeExplicitAutograd",
                                      "CompositeExplicitAutogradNonFunctional")):
            continue
        _lib.impl(_overload_name(op), _kernel(op, _with_out(op, fn)), "PrivateUse1")
    for op, fn in own.items():
        if not has(op.name(), "PrivateUse1"):
            _lib.impl(_overload_name(op), _kernel(op, _with_out(op, fn)), "PrivateUse1")


def _fixes():
    """PyTorch decompositions that need a change for tpu inputs, and small ops it has none for."""
    def efficient_zero_tensor(size, dtype=None, layout=None, device=None, pin_memory=None):
        # CUDA returns a ZeroTensor (a dispatch-key marked zero); real zeros mean the same.
        return torch.zeros(size, dtype=dtype, device=device)

    def embedding_renorm_(weight, indices, max_norm, norm_type):
        # Rows that indices name get scaled to max_norm when their norm exceeds it (CPU's
        # max_norm / (norm + 1e-7)); a repeated index writes the same row twice.
        idx = indices.reshape(-1)
        rows = weight.index_select(0, idx)
        norms = rows.norm(p=norm_type, dim=1, keepdim=True)
        scale = torch.where(norms > max_norm, max_norm / (norms + 1e-7), torch.ones_like(norms))
        return weight.index_copy_(0, idx, rows * scale)

    def amp_non_finite_check_and_unscale_(tensors, found_inf, inv_scale):
        # GradScaler.unscale_: found_inf = 1 when any value is inf/nan; every tensor *= inv_scale.
        # On the device, no sync (as CUDA's kernel).
        for t in tensors:
            bad = (~torch.isfinite(t)).any().to(found_inf.dtype).reshape(found_inf.shape)
            found_inf.copy_(torch.maximum(found_inf, bad))
            t.mul_(inv_scale.to(t.dtype) if t.dtype != inv_scale.dtype else inv_scale)

    def amp_update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval):
        # CUDA's rule: an inf/nan backs the scale off and resets the tracker; else the tracker
        # counts up and, on reaching growth_interval, the scale grows and the tracker resets.
        inf = found_inf > 0
        counted = growth_tracker + 1
        grow = (~inf) & (counted >= growth_interval)
        new_scale = torch.where(inf, scale * backoff_factor, torch.where(grow, scale * growth_factor, scale))
        scale.copy_(new_scale)
        growth_tracker.copy_(torch.where(inf | grow, torch.zeros_like(growth_tracker), counted))
        return scale

    def randperm_out(n, *, generator=None, out):
        # A uniformly random permutation: the order of n uniform f64 keys (ties have
        # probability ~n^2 / 2^54), drawn from the tpu generator, so torch.manual_seed
        # reproduces it (not CPU's sequence, as with CUDA).
        keys = torch.rand(n, dtype=torch.float64, device=out.device, generator=generator)
        perm = keys.argsort()
        out.resize_(n)
        return out.copy_(perm)

    aten = torch.ops.aten
    from torch._decomp import decomposition_table as table

    def geometric(self, p, generator=None):
        # PyTorch's ref draws rand_like(self): all zeros for an integer self (always 1 then),
        # and 1.0 often enough in bf16 to give inf. Draw in f32 (f64 for f64) and convert.
        fdt = torch.float64 if self.dtype == torch.float64 else torch.float32
        u = torch.rand(self.shape, dtype=fdt, device=self.device, generator=generator)
        return (torch.floor(torch.log1p(-u) / math.log1p(-p)) + 1).to(self.dtype)

    def geometric_(self, p, generator=None):
        return self.copy_(geometric(self, p, generator))

    def int_linspace(fn):
        # CPU converts start and end to an integer dtype first (truncating), steps in double
        # from both ends (halfway split) and truncates; the ref interpolates the raw floats.
        def linspace(start, end, steps, *, dtype=None, **kwargs):
            if dtype is None or dtype.is_floating_point or dtype.is_complex or dtype == torch.bool:
                return fn(start, end, steps, **({"dtype": dtype} if dtype is not None else {}), **kwargs)
            device = kwargs.get("device")
            if device is None and isinstance(start, torch.Tensor):
                device = start.device
            lo = int(start.item() if isinstance(start, torch.Tensor) else start)
            hi = int(end.item() if isinstance(end, torch.Tensor) else end)
            if steps <= 1:
                return torch.full((steps,), lo, dtype=dtype, device=device)
            idx = torch.arange(steps, dtype=torch.float64, device=device)
            step = (hi - lo) / (steps - 1)
            vals = torch.where(idx < steps // 2, lo + step * idx, hi - step * (steps - 1 - idx))
            return vals.to(dtype)

        return linspace

    linspaces = {}
    for name in ("default",):  # the Tensor overloads keep the ref (their int64 tie-breaks still differ)
        fn = table.get(getattr(aten.linspace, name))
        if fn is not None:
            linspaces[getattr(aten.linspace, name)] = int_linspace(fn)
            out = getattr(aten.linspace, "out" if name == "default" else name + "_out", None)
            if out is not None:
                linspaces[out] = int_linspace(fn)
    return {**linspaces, aten.geometric.default: geometric,
            aten.geometric_.default: geometric_, aten._efficientzerotensor.default: efficient_zero_tensor,
            aten.embedding_renorm_.default: embedding_renorm_,
            aten._amp_foreach_non_finite_check_and_unscale_.default: amp_non_finite_check_and_unscale_,
            aten._amp_update_scale_.default: amp_update_scale_,
            aten.randperm.generator_out: randperm_out}
