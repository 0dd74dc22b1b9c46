"""Custom kernels on tpu: JAX / Pallas functions (`from_jax`) and IR built in Python (`ir`).

`from_jax(fn)` returns a callable on tpu tensors. Per input signature (shapes, dtypes) it
traces `fn` with JAX once (abstract `ShapeDtypeStruct`s, no data), lowers it to StableHLO,
imports that into the IR (csrc/ir/stablehlo_import.cpp) and runs the graph as one tpu op: in
every eager mode, inside `torch.compile(backend="tpu")` captures, on the host and pjrt
runtimes (where the graph prints back to StableHLO for the plugin). Gradients come from
`jax.vjp` of `fn` (so `jax.custom_vjp` inside `fn` is honoured: Pallas kernels need one),
lowered and imported the same way, or from `backward=`.

Each kernel is a `torch.library` custom op (`torch_tpu_kernels::<name>`, Tensor[] -> Tensor[])
with a fake implementation (shapes from `jax.eval_shape`) and an autograd formula, so Dynamo
keeps it in the graph and AOTAutograd differentiates through it.

JAX is optional: `make jax` unpacks the pinned wheels into the environment
(`/usr/local/lib/torch_tpu/jax-site`, added to `sys.path` here when `import jax` fails);
elsewhere `pip install jax`. See docs/decisions/custom-kernels.md.
"""
from __future__ import annotations

import functools
import itertools
import os
import re
import sys
import threading
from typing import Any, Callable, Sequence

import torch

from torch_tpu import _C

__all__ = ["from_jax", "JaxKernel", "jax_available", "JAX_INSTALL_HINT", "ir"]

JAX_SITE = "/usr/local/lib/torch_tpu/jax-site"
JAX_INSTALL_HINT = ("JAX is not installed; run `make jax` (installs the pinned jax/jaxlib wheels into "
                    "the project environment) or `pip install jax==0.12.0.1`")


def _add_jax_site() -> None:
    """Appends the environment's jax-site to sys.path when JAX is not importable otherwise
    (cheap: no import), so `from torch_tpu import kernel` then `import jax` works inside the
    environment. Not done by `import torch_tpu`: libraries that probe for JAX (transformers)
    should not find it unless kernels are in use."""
    import importlib.util
    if JAX_SITE not in sys.path and os.path.isdir(JAX_SITE) and importlib.util.find_spec("jax") is None:
        sys.path.append(JAX_SITE)


_add_jax_site()


def _import_jax():
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # JAX only traces and lowers here
    try:
        import jax
    except ImportError:
        if not os.path.isdir(JAX_SITE):
            raise ImportError(f"[torch_tpu.kernel] {JAX_INSTALL_HINT}") from None
        if JAX_SITE not in sys.path:
            sys.path.append(JAX_SITE)
        try:
            import jax
        except ImportError as e:
            raise ImportError(f"[torch_tpu.kernel] importing JAX from {JAX_SITE} failed ({e}); "
                              f"{JAX_INSTALL_HINT}") from e
    return jax


def jax_available() -> bool:
    """True when JAX can be imported (directly or from the environment's jax-site)."""
    try:
        _import_jax()
        return True
    except ImportError:
        return False


_TORCH_TO_JAX = {torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
                 torch.bfloat16: "bfloat16", torch.int8: "int8", torch.int16: "int16",
                 torch.int32: "int32", torch.int64: "int64", torch.uint8: "uint8", torch.bool: "bool"}


def _jax_dtype(dt: torch.dtype):
    import jax.numpy as jnp
    if dt not in _TORCH_TO_JAX:
        raise TypeError(f"[torch_tpu.kernel] unsupported dtype {dt}; expected one of "
                        f"{sorted(str(d) for d in _TORCH_TO_JAX)}")
    return jnp.dtype(_TORCH_TO_JAX[dt])


def _torch_dtype(jdt) -> torch.dtype:
    name = str(jdt)
    for t, n in _TORCH_TO_JAX.items():
        if n == name:
            return t
    raise TypeError(f"[torch_tpu.kernel] the JAX function returns dtype {name}; expected one of "
                    f"{sorted(_TORCH_TO_JAX.values())}")


Spec = tuple  # ((shape...), torch.dtype)


def _specs(xs: Sequence[torch.Tensor]) -> tuple:
    return tuple((tuple(x.shape), x.dtype) for x in xs)


def _x64(specs) -> bool:
    return any(dt in (torch.float64, torch.int64) for _, dt in specs)


class _Lowered:
    """One traced signature: the imported kernel, its output structure, constants per device."""

    def __init__(self, kernel, treedef, out_specs):
        self.kernel = kernel
        self.treedef = treedef
        self.out_specs = out_specs
        self._consts: dict[Any, list[torch.Tensor]] = {}

    def constants(self, device) -> list[torch.Tensor]:
        c = self._consts.get(device)
        if c is None:
            c = [t.to(device) for t in self.kernel.constants()]
            self._consts[device] = c
        return c

    def run(self, xs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        dev = xs[0].device if xs else torch.device("tpu")
        return list(_C._run_kernel(self.kernel, list(xs) + self.constants(dev)))


def _trace(fn: Callable, specs: tuple, name: str):
    """jax.jit(fn).lower on abstract inputs -> (StableHLO text, output treedef, output specs)."""
    jax = _import_jax()
    ctx = jax.enable_x64(True) if _x64(specs) else _nullcontext()
    with ctx:
        args = [jax.ShapeDtypeStruct(s, _jax_dtype(dt)) for s, dt in specs]
        out = jax.eval_shape(fn, *args)
        leaves, treedef = jax.tree_util.tree_flatten(out)
        out_specs = tuple((tuple(o.shape), _torch_dtype(o.dtype)) for o in leaves)
        lowered = jax.jit(fn, keep_unused=True).lower(*args)  # @main takes every input
        module = lowered.compiler_ir("stablehlo")
        text = module.operation.get_asm(large_elements_limit=None, enable_debug_info=False)
    return text, treedef, out_specs


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


_ids = itertools.count()
_lock = threading.RLock()


class JaxKernel:
    """A JAX function as a tpu op; see `from_jax`."""

    def __init__(self, fn: Callable, *, backward: Callable | None = None, name: str | None = None):
        self.fn = fn
        self.backward_fn = backward
        base = re.sub(r"\W", "_", name or getattr(fn, "__name__", "kernel")) or "kernel"
        self.name = f"{base}_{next(_ids)}"
        self._cache: dict[tuple, _Lowered] = {}
        self._structs: dict[tuple, Any] = {}
        self._vjp: dict[int, JaxKernel] = {}
        self._op = self._register()

    # -- tracing and caching ------------------------------------------------------------
    def lowered(self, specs: tuple) -> _Lowered:
        key = (specs, _C._get_matmul_precision())
        low = self._cache.get(key)
        if low is None:
            with _lock:
                low = self._cache.get(key)
                if low is None:
                    text, treedef, out_specs = _trace(self.fn, specs, self.name)
                    kernel = _C._import_stablehlo(text, f"kernel.{self.name}")
                    low = _Lowered(kernel, treedef, out_specs)
                    self._cache[key] = low
        return low

    def stablehlo(self, *xs: torch.Tensor) -> str:
        """The imported graph of this signature, printed as StableHLO (what pjrt compiles)."""
        return self.lowered(_specs(xs)).kernel.stablehlo()

    # -- the custom op ---------------------------------------------------------------------
    def _register(self):
        qual = f"torch_tpu_kernels::{self.name}"
        kernel = self

        @torch.library.custom_op(qual, mutates_args=(), device_types="tpu")
        def op(xs: list[torch.Tensor]) -> list[torch.Tensor]:
            if not xs:
                raise ValueError(f"[kernel.{kernel.name}] expected at least one tensor input")
            return kernel.lowered(_specs(xs)).run(xs)

        @op.register_fake
        def _(xs):
            low = kernel.lowered(_specs(xs))
            return [xs[0].new_empty(s, dtype=dt) for s, dt in low.out_specs]

        def setup_context(ctx, inputs, output):
            (xs,) = inputs
            ctx.save_for_backward(*xs)
            ctx.out_specs = [(tuple(o.shape), o.dtype) for o in output]

        def backward(ctx, grads):
            xs = list(ctx.saved_tensors)
            gs = [g if g is not None else xs[0].new_zeros(s, dtype=dt)
                  for g, (s, dt) in zip(grads, ctx.out_specs)]
            diff = [i for i, x in enumerate(xs) if x.is_floating_point()]
            out = kernel._vjp_kernel(len(xs))._op(xs + gs)
            res = [None] * len(xs)
            for i, g in zip(diff, out):
                res[i] = g
            return (res,)

        op.register_autograd(backward, setup_context=setup_context)
        return op

    def _vjp_kernel(self, n: int) -> "JaxKernel":
        with _lock:
            k = self._vjp.get(n)
            if k is None:
                k = self._vjp[n] = JaxKernel(_vjp_fn(self.fn, self.backward_fn, n), name=f"{self.name}_vjp")
        return k

    def __call__(self, *xs: torch.Tensor):
        for i, x in enumerate(xs):
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"[kernel.{self.name}] argument {i} is {type(x).__name__}; expected a "
                                "tensor (bind other arguments with functools.partial)")
        outs = self._op(list(xs))
        return _unflatten(self._structure(_specs(xs)), outs)

    @torch._dynamo.assume_constant_result
    def _structure(self, specs: tuple):
        """The output pytree as nested tuples of leaf indices (an int: one leaf), a constant for
        Dynamo (so a compiled caller traces only the custom op)."""
        st = self._structs.get(specs)
        if st is None:
            jax = _import_jax()
            treedef = self.lowered(specs).treedef
            st = self._structs[specs] = _encode(jax.tree_util.tree_unflatten(treedef, list(range(treedef.num_leaves))))
        return st


def _encode(tree):
    if isinstance(tree, int):
        return tree
    if isinstance(tree, (tuple, list)):
        return tuple(_encode(t) for t in tree)
    raise TypeError(f"[torch_tpu.kernel] the JAX function returns a {type(tree).__name__}; expected an "
                    "array or (nested) tuples/lists of arrays")


def _unflatten(s, outs):
    if isinstance(s, int):
        return outs[s]
    return tuple(_unflatten(c, outs) for c in s)


def _vjp_fn(fn: Callable, backward: Callable | None, n: int) -> Callable:
    """(n primals, cotangents...) -> gradients of the floating primals, as a JAX function."""

    def vjp(*args):
        jax = _import_jax()
        import jax.numpy as jnp

        primals, cts = list(args[:n]), list(args[n:])
        diff = [i for i, p in enumerate(primals) if jnp.issubdtype(p.dtype, jnp.floating)]
        if backward is not None:
            grads = backward(*primals, *cts)
            grads = list(grads) if isinstance(grads, (tuple, list)) else [grads]
            return tuple(grads[i] for i in diff) if len(grads) == n else tuple(grads)

        def f_diff(*dp):
            full = list(primals)
            for i, v in zip(diff, dp):
                full[i] = v
            return fn(*full)

        out, pullback = jax.vjp(f_diff, *[primals[i] for i in diff])
        treedef = jax.tree_util.tree_structure(out)
        return tuple(pullback(jax.tree_util.tree_unflatten(treedef, cts)))

    vjp.__name__ = getattr(fn, "__name__", "kernel") + "_vjp"
    return vjp


def from_jax(fn: Callable | None = None, *, backward: Callable | None = None, name: str | None = None):
    """Wraps a JAX function (jnp code, `pl.pallas_call(..., interpret=True)`) as a tpu op.

    `fn(*arrays)` takes positional arrays (bind anything else with functools.partial) and
    returns an array or a pytree of arrays. The result maps tpu tensors to tpu tensors with
    the same structure. Gradients: `jax.vjp(fn)` (define a `jax.custom_vjp` inside `fn` for a
    Pallas kernel), or `backward(*primals, *cotangents) -> grads` (a JAX function, one gradient
    per floating input). Usable as a decorator: `@from_jax` or `@from_jax(name="rmsnorm")`.
    """
    _import_jax()  # fail early, with the install hint
    if fn is None:
        return functools.partial(from_jax, backward=backward, name=name)
    return JaxKernel(fn, backward=backward, name=name)


from torch_tpu import kernel_ir as ir  # noqa: E402
