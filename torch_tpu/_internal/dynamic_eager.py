"""Bounded dynamism in eager mode (issue 19 step 4): `torch_tpu.mark_dynamic(t, dim, max=)`.

A marked tensor is a `DynamicTensor`: its storage is padded along `dim` to a bucket (the next
power of two, or `TORCH_TPU_BUCKETS`, at most `max`), while its logical size stays the true one.
Every op on it records the *padded* computation, with masks where padding would change a real
position, so the programs an eager step compiles (a fused window, or strict per-op programs)
are the same for every length of a bucket: one compilation per bucket instead of one per
length. The true length is a 0-dim int64 device tensor (an operand, never a constant).

The masking rules are pad_rules.py's (the ones torch.compile's buckets use), applied per torch
function through `__torch_function__`:

- Sizes. `t.shape` / `t.size(d)` of a padded dim is a `SymLen`: a Python int holding the true
  size that also remembers it is `a * s + c` of the length `s`; `+ - *` and exact `//` with
  ints keep that, anything else gives a plain int (the true value). A `SymLen` in `view`,
  `reshape`, slices and `torch.arange` keeps those padded (arange needs the length mode below,
  since it has no tensor argument).
- No rule, or a rule that refuses (sort, cat along the dim, factories of the length, in-place
  writes of other tensors into the padded dim, ...): the operands are cut to their true size
  and the op runs as PyTorch would (`fallbacks` in `torch_tpu.metrics()["dynamic"]`, one
  warning per function). Correct always; such ops compile per length.
- In-place ops on a DynamicTensor raise (their padded positions would go stale silently).
- Values leave as true-size tensors: `.cpu()`, `.item()`, `.tolist()`, printing.

Autograd runs on the padded tensors: the masked forward equals the unpadded computation as a
function of real inputs and parameters (masks by torch.where), so parameter gradients are the
true ones and padded positions get exactly zero gradient.

The length mode: the first `mark_dynamic` pushes a TorchFunctionMode on the calling thread
(`torch.arange(T)` with a `SymLen` T becomes a padded arange; calls without a SymLen pass
straight through, about a microsecond each). `uninstall()` removes it.

`TORCH_TPU_DYNAMIC_CHECK=1` (the tests set it): every rule's result is checked against the
shapes PyTorch's meta kernels give for the true sizes; a mismatch raises.
"""
from __future__ import annotations

import builtins
import math
import operator
import os
import threading
import warnings

import torch
from torch.overrides import TorchFunctionMode

from torch_tpu._internal import pad_rules as R
from torch_tpu._internal.buckets import _unpad, bucket_for, parse_buckets

_lock = threading.Lock()
_STATS: dict = {"marks": 0, "buckets": {}, "fallbacks": {}, "rule_ops": 0}
_WARNED: set = set()
CHECK = os.environ.get("TORCH_TPU_DYNAMIC_CHECK", "0") not in ("", "0")


# ----------------------------------------------------------------------------- the length


class _Sym:
    """One dynamic length: true size `n`, padded size `P`; a context per device (the true size
    uploaded once to that device)."""

    def __init__(self, n: int, P: int):
        self.n, self.P = n, P
        self._ctxs: dict = {}

    def ctx(self, device) -> "_EagerCtx":
        device = torch.device(device)
        c = self._ctxs.get(device)
        if c is None:
            nt = torch.tensor(self.n, dtype=torch.int64)
            if device.type != "cpu":
                nt = nt.to(device)
            c = self._ctxs[device] = _EagerCtx(self, nt, device)
        return c


class _EagerCtx(R._Ctx):
    def __init__(self, sym: _Sym, n_t, device):
        super().__init__(n_t, device, sym.P)
        self.sym = sym


_SYMS: dict = {}


def _sym_for(n: int, P: int) -> _Sym:
    s = _SYMS.get((n, P))
    if s is None:
        s = _SYMS[(n, P)] = _Sym(n, P)
    return s


class SymLen(int):
    """The true value of a size that is `lin` (a*s + c) of the dynamic length `sym`."""

    def __new__(cls, lin: R.Lin, sym: _Sym):
        v = lin.at(sym.n)
        if lin.a <= 0:  # not a size that grows with the length: a plain number
            return v
        o = int.__new__(cls, v)
        o.lin, o.sym = lin, sym
        return o

    def __add__(self, o):
        if type(o) is int:
            return SymLen(R.Lin(self.lin.a, self.lin.c + o), self.sym)
        if isinstance(o, SymLen) and o.sym is self.sym:
            return SymLen(R.Lin(self.lin.a + o.lin.a, self.lin.c + o.lin.c), self.sym)
        return int(self) + o

    __radd__ = __add__

    def __sub__(self, o):
        if type(o) is int:
            return SymLen(R.Lin(self.lin.a, self.lin.c - o), self.sym)
        if isinstance(o, SymLen) and o.sym is self.sym:
            return SymLen(R.Lin(self.lin.a - o.lin.a, self.lin.c - o.lin.c), self.sym)
        return int(self) - o

    def __rsub__(self, o):
        return o - int(self)

    def __mul__(self, o):
        if type(o) is int and o > 0:
            return SymLen(R.Lin(self.lin.a * o, self.lin.c * o), self.sym)
        return int(self) * o

    __rmul__ = __mul__

    def __floordiv__(self, o):
        if type(o) is int and o > 0 and self.lin.a % o == 0 and self.lin.c % o == 0:
            return SymLen(R.Lin(self.lin.a // o, self.lin.c // o), self.sym)
        return int(self) // o

    def __reduce__(self):  # pickles as the number it is
        return (int, (int(self),))


# ----------------------------------------------------------------------------- the tensor


class DynamicTensor(torch.Tensor):
    """A tensor padded along its dynamic dims (`_t`: the plain padded tensor, `_pads`: pad_rules'
    {dim: factors}, `_ctx`: the length on this device). Made by `mark_dynamic` and by ops on it."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return _dispatch(func, args, kwargs or {})


def _wrap(t: torch.Tensor, pads: dict, sym: _Sym) -> DynamicTensor:
    with torch._C.DisableTorchFunctionSubclass():
        d = t.as_subclass(DynamicTensor)
    d._t, d._pads, d._ctx = t, dict(pads), sym.ctx(t.device)
    return d


def _logical(d: DynamicTensor) -> torch.Tensor:
    """The true-size tensor (a view of the padded one where the layout allows)."""
    return _unpad(d._t, d._pads, d._ctx.sym.n)


def _dim_len(d: DynamicTensor, i: int):
    f = d._pads.get(i)
    if f is None:
        return d._t.shape[i]
    try:
        lin = R._dim_size(R.PT(d._t, d._pads), i)
    except R.Refuse:  # two padded factors merged: the plain true size
        n = d._ctx.sym.n
        return math.prod(s if lin is None else lin.at(n) for s, lin in f)
    return SymLen(lin, d._ctx.sym)


def _logical_shape(d: DynamicTensor) -> torch.Size:
    return torch.Size(_dim_len(d, i) for i in range(d._t.dim()))


# ----------------------------------------------------------------------------- dispatch

_NAMES: dict = {}


def _tensor_name(func):
    """The Tensor method or property name of `func`, or None for a torch function."""
    if not _NAMES:
        for k in dir(torch.Tensor):
            try:
                v = getattr(torch.Tensor, k)
            except Exception:
                continue
            if hasattr(v, "__get__") and not callable(v):  # a property / getset descriptor
                _NAMES[v.__get__] = k
            elif callable(v):
                try:
                    _NAMES[v] = k
                except TypeError:
                    pass
    try:
        return _NAMES.get(func)
    except TypeError:
        return None


# Padding never changes these: ask the padded tensor.
_QUERIES = {
    "dim", "ndimension", "ndim", "dtype", "device", "is_cuda", "requires_grad", "is_leaf", "grad_fn",
    "layout", "is_floating_point", "is_complex", "is_signed", "element_size", "get_device",
    "is_contiguous", "data_ptr", "itemsize", "is_sparse", "is_quantized", "is_meta", "is_nested",
    "_is_view", "__hash__", "retain_grad", "requires_grad_", "is_inference", "names", "__dlpack_device__",
}
# Values leave as true-size tensors.
_LEAVE = {"cpu", "numpy", "tolist", "item", "__repr__", "__str__", "__format__", "__array__", "__bool__",
          "__float__", "__int__", "__index__", "__len__", "__iter__", "__reduce_ex__", "__deepcopy__", "backward"}
_BINOPS = {
    "__add__": operator.add, "__sub__": operator.sub, "__mul__": operator.mul, "__truediv__": operator.truediv,
    "__matmul__": operator.matmul, "__pow__": operator.pow, "__lt__": operator.lt, "__le__": operator.le,
    "__gt__": operator.gt, "__ge__": operator.ge, "__eq__": operator.eq, "__ne__": operator.ne,
    "__and__": operator.and_, "__or__": operator.or_,
}
_RBINOPS = {"__radd__": operator.add, "__rsub__": operator.sub, "__rmul__": operator.mul,
            "__rtruediv__": operator.truediv, "__rmatmul__": operator.matmul, "__rpow__": operator.pow,
            "__rand__": operator.and_, "__ror__": operator.or_}


class _Node:
    """What pad_rules' interpreter reads of an FX node."""

    __slots__ = ("op", "target")

    def __init__(self, op, target):
        self.op, self.target = op, target

    def format_node(self):
        return getattr(self.target, "__name__", str(self.target))


def _walk(x, fn):
    """Maps fn over the leaves of nested lists/tuples/dicts/slices (torch.Size stays a tuple)."""
    if isinstance(x, (list, tuple)) and not isinstance(x, torch.Tensor):
        return type(x)(_walk(v, fn) for v in x) if not isinstance(x, torch.Size) else tuple(_walk(v, fn) for v in x)
    if isinstance(x, dict):
        return {k: _walk(v, fn) for k, v in x.items()}
    if isinstance(x, slice):
        return slice(_walk(x.start, fn), _walk(x.stop, fn), _walk(x.step, fn))
    return fn(x)


def _leaves(x, out):
    if isinstance(x, (list, tuple)) and not isinstance(x, torch.Tensor):
        for v in x:
            _leaves(v, out)
    elif isinstance(x, dict):
        for v in x.values():
            _leaves(v, out)
    elif isinstance(x, slice):
        _leaves((x.start, x.stop, x.step), out)
    else:
        out.append(x)
    return out


def _plain(x):
    """Dynamic tensors cut to their true size, SymLens as ints: what PyTorch itself would see."""
    if isinstance(x, DynamicTensor):
        return _logical(x)
    if isinstance(x, SymLen):
        return int(x)
    return x


def _fallback(func, name, args, kwargs, why: str):
    label = name or getattr(func, "__name__", str(func))
    if name not in _LEAVE:
        with _lock:
            _STATS["fallbacks"][label] = _STATS["fallbacks"].get(label, 0) + 1
        if label not in _WARNED:
            _WARNED.add(label)
            warnings.warn(f"[mark_dynamic] {label}: {why}; its dynamic operands are cut to their true size "
                          f"(correct, but compiled once per length)", stacklevel=4)
    return func(*_walk(args, _plain), **_walk(kwargs, _plain))


def _dispatch(func, args, kwargs):
    name = _tensor_name(func)
    leaves = _leaves((args, kwargs), [])
    dyns = [a for a in leaves if isinstance(a, DynamicTensor)]
    if name in _QUERIES:
        if name == "__hash__":
            return id(args[0])
        if name == "requires_grad_" and isinstance(args[0], DynamicTensor):
            args[0]._t.requires_grad_(*args[1:], **kwargs)
            return args[0]
        return func(*_walk(args, lambda a: a._t if isinstance(a, DynamicTensor) else a), **kwargs)
    self_dyn = bool(args) and isinstance(args[0], DynamicTensor)
    if self_dyn and name in ("size", "shape", "numel", "nelement"):
        d = args[0]
        if name == "shape":
            return _logical_shape(d)
        if name == "size":
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            return _logical_shape(d) if dim is None else _dim_len(d, dim % d._t.dim())
        return math.prod(int(s) for s in _logical_shape(d))
    if name in _LEAVE or (name == "to" and _to_cpu(args, kwargs)):
        return _fallback(func, name, args, kwargs, "")
    if (self_dyn and name is not None and name.endswith("_") and not name.endswith("__")) or name in (
            "__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "set_", "resize_") or (
            isinstance(kwargs.get("out"), DynamicTensor)):
        if self_dyn or isinstance(kwargs.get("out"), DynamicTensor):
            raise RuntimeError(f"[mark_dynamic] in-place {name or func} on a dynamic tensor is not supported; "
                               "use the out-of-place form")
    if kwargs.get("out") is not None:  # a rule would resize a plain `out` to the padded shape
        return _fallback(func, name, args, kwargs, "out= tensor")
    syms = {id(d._ctx.sym): d._ctx.sym for d in dyns}
    devices = {d._t.device for d in dyns}
    if len(syms) > 1 or len(devices) > 1:
        return _fallback(func, name, args, kwargs, "operands of two different dynamic lengths or devices")
    if not dyns:  # SymLens only (torch.arange(T), torch.ones(T, T), ...)
        sym = next(a.sym for a in leaves if isinstance(a, SymLen))
        if func is torch.arange:
            dev = kwargs.get("device")
            ctx = sym.ctx(dev if dev is not None else "cpu")
            rule_args = _walk(args, lambda a: a.lin if isinstance(a, SymLen) and a.sym is sym else _plain(a))
            try:
                out = R._arange(ctx, *rule_args, **kwargs)
            except R.Refuse as e:
                return _fallback(func, name, args, kwargs, str(e))
            return _rewrap(out, sym, func, name, args, kwargs)
        return func(*_walk(args, _plain), **_walk(kwargs, _plain))
    sym = next(iter(syms.values()))
    ctx = dyns[0]._ctx

    def conv(a):
        if isinstance(a, DynamicTensor):
            return R.PT(a._t, a._pads)
        if isinstance(a, SymLen):
            return a.lin if a.sym is sym else int(a)
        return a

    rargs, rkwargs = _walk(args, conv), _walk(kwargs, conv)
    if name in _BINOPS:
        node = _Node("call_function", _BINOPS[name])
    elif name in _RBINOPS:
        node = _Node("call_function", _RBINOPS[name])
        rargs = (rargs[1], rargs[0])
    elif name == "__getitem__":
        node = _Node("call_function", operator.getitem)
    elif name in ("matmul", "bmm"):  # Tensor.__matmul__ is Tensor.matmul
        node = _Node("call_function", torch.matmul)
    elif name == "__neg__":
        node = _Node("call_function", operator.neg)
    elif name is not None:
        node = _Node("call_method", name)
    else:
        node = _Node("call_function", func)
    try:
        out = R.PadInterpreter(None, None, ctx, {}).step(node, rargs, rkwargs)
    except R.Refuse as e:
        return _fallback(func, name, args, kwargs, str(e))
    except (RuntimeError, TypeError, ValueError, IndexError) as e:  # a rule that cannot take these args
        return _fallback(func, name, args, kwargs, f"{type(e).__name__}: {e}")
    with _lock:
        _STATS["rule_ops"] += 1
    return _rewrap(out, sym, func, name, args, kwargs)


def _to_cpu(args, kwargs) -> bool:
    for a in list(args[1:]) + list(kwargs.values()):
        if isinstance(a, (str, torch.device)) and torch.device(a).type == "cpu":
            return True
    return False


def _rewrap(out, sym, func, name, args, kwargs):
    def wrap(o):
        if isinstance(o, R.PT):
            return _wrap(o.t, o.pads, sym)
        if isinstance(o, R.Lin):
            return SymLen(o, sym)
        return o

    res = _walk(out, wrap) if isinstance(out, (tuple, list)) else wrap(out)
    if CHECK:
        _check(func, name, args, kwargs, res)
    return res


def _check(func, name, args, kwargs, res):
    """The rule's result has the shapes PyTorch's own op gives at the true sizes."""
    def meta(a):
        if isinstance(a, DynamicTensor):
            return torch.empty([int(s) for s in _logical_shape(a)], dtype=a._t.dtype, device="meta")
        if isinstance(a, torch.Tensor):
            return torch.empty(a.shape, dtype=a.dtype, device="meta")
        if isinstance(a, SymLen):
            return int(a)
        if isinstance(a, (str, torch.device)) and name == "to":
            return "meta"
        return a

    mkw = _walk(kwargs, meta)
    if "device" in mkw:
        mkw["device"] = "meta"
    try:
        with torch.no_grad():
            want = func(*_walk(args, meta), **mkw)
    except Exception:  # no meta kernel for it: nothing to compare
        return
    got_l = _leaves(res, []) if isinstance(res, (tuple, list)) else [res]
    want_l = _leaves(want, []) if isinstance(want, (tuple, list)) else [want]
    for g, w in zip(got_l, want_l):
        if isinstance(w, torch.Tensor):
            gs = [int(s) for s in (_logical_shape(g) if isinstance(g, DynamicTensor) else g.shape)]
            if gs != list(w.shape):
                raise AssertionError(f"[mark_dynamic] the padding rule for {name or func} gives true shape {gs}, "
                                     f"PyTorch gives {list(w.shape)}")
        elif isinstance(w, int) and int(g) != w:
            raise AssertionError(f"[mark_dynamic] the padding rule for {name or func} gives {int(g)}, PyTorch {w}")


# ----------------------------------------------------------------------------- the length mode


class _LengthMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if any(issubclass(t, DynamicTensor) for t in types):
            return _dispatch(func, args, kwargs)
        for a in _leaves((args, kwargs), []):
            if isinstance(a, SymLen):
                return _dispatch(func, args, kwargs)
        return func(*args, **kwargs)


_modes = threading.local()


def _install():
    if getattr(_modes, "mode", None) is None:
        m = _LengthMode()
        m.__enter__()
        _modes.mode = m


def uninstall():
    """Removes the length mode from this thread (tests; code done with dynamic lengths)."""
    m = getattr(_modes, "mode", None)
    if m is None:
        return
    n = torch._C._len_torch_function_stack()
    if n == 0 or torch._C._get_function_stack_at(n - 1) is not m:
        raise RuntimeError("[mark_dynamic] uninstall: another torch function mode was pushed after ours")
    m.__exit__(None, None, None)
    _modes.mode = None


# ----------------------------------------------------------------------------- the API


def mark_dynamic(t: torch.Tensor, dim: int, min: int | None = None, max: int | None = None) -> DynamicTensor:
    """`t` with dim `dim` dynamic: padded to a bucket (TORCH_TPU_BUCKETS, the next power of two
    by default, capped at `max`), its true size kept. Mark the CPU batch before `.to("tpu")`:
    it is padded on the host and uploaded (a tpu tensor is copied to the host and back; one that
    requires grad is padded by torch.cat on its device: one small program per length). Other tensors marked with the same true size share the length."""
    if isinstance(t, DynamicTensor):
        raise ValueError("[mark_dynamic] the tensor is already dynamic; got a DynamicTensor, expected a plain tensor")
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"[mark_dynamic] expected a tensor; got {type(t).__name__}")
    nd = t.dim()
    if not -nd <= dim < nd:
        raise IndexError(f"[mark_dynamic] dim out of range; got {dim}, expected -{nd} <= dim < {nd}")
    dim %= nd
    n = t.shape[dim]
    if n < 1 or (min is not None and n < min) or (max is not None and n > max):
        raise ValueError(f"[mark_dynamic] size of dim {dim} out of bounds; got {n}, expected "
                         f"{min if min is not None else 1} <= size <= {max if max is not None else 'any'}")
    buckets = parse_buckets(os.environ.get("TORCH_TPU_BUCKETS")) or "pow2"
    P = bucket_for(n, buckets) or n
    if max is not None:
        P = builtins.min(P, max)
    sym = _sym_for(n, P)
    if P > n:
        if not (t.requires_grad and torch.is_grad_enabled()):
            shape = list(t.shape)
            shape[dim] = P
            host = torch.zeros(shape, dtype=t.dtype)
            host.narrow(dim, 0, n).copy_(t.detach().cpu())
            p = host if t.device.type == "cpu" else host.to(t.device)
        else:  # differentiable: the gradient reaches t
            extra = list(t.shape)
            extra[dim] = P - n
            p = torch.cat([t, t.new_zeros(extra)], dim=dim)
    else:
        p = t
    with _lock:
        _STATS["marks"] += 1
        b = _STATS["buckets"].setdefault(P, {"marks": 0, "lengths": set(), "real": 0, "padded": 0})
        b["marks"] += 1
        b["lengths"].add(n)
        b["real"] += t.numel()
        b["padded"] += p.numel()
    _install()
    return _wrap(p, {dim: ((P, R.Lin(1, 0)),)}, sym)



def stats() -> dict:
    """metrics()["dynamic"]: marks, per bucket (marks, distinct lengths, waste = padded / real - 1),
    ops run by a padding rule, and fallbacks per function (operands cut to the true size)."""
    with _lock:
        return {
            "marks": _STATS["marks"],
            "rule_ops": _STATS["rule_ops"],
            "buckets": {P: {"marks": b["marks"], "lengths": len(b["lengths"]),
                            "waste": round(b["padded"] / b["real"] - 1, 4) if b["real"] else 0.0}
                        for P, b in sorted(_STATS["buckets"].items())},
            "fallbacks": dict(_STATS["fallbacks"]),
        }
