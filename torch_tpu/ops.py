"""torch.tpu.ops: TorchTPU's tpu-specific ops, by their TorchTPU names.

optimization_barrier(*tensors) returns its tensors unchanged, and tells a compiler not to fuse
or move computation across that point: XLA materializes each result (StableHLO
`optimization_barrier`), so what comes after it never recomputes what came before. Use it in a
loop that Python unrolls into one fused or compiled graph (a recurrence over time steps): XLA
would otherwise inline each step's producers into the next, and a step that reads its
predecessor at several positions (shifts) makes the generated code grow exponentially with the
number of steps. On the host runtime it is free (the result aliases the operand). The op is
`torch.ops.tpu.optimization_barrier` (Tensor[] -> Tensor[]): a torch.library custom op, so it
traces under torch.compile; its gradient passes through unchanged; on other devices it copies.
"""
from __future__ import annotations

import torch

from torch_tpu.kernel_ir import _DT, kernel

__all__ = ["optimization_barrier"]


@kernel(name="optimization_barrier")
def _barrier(b, *xs):
    return tuple(b.op("optimization_barrier", x) for x in xs)


@torch.library.custom_op("tpu::optimization_barrier", mutates_args=())
def _barrier_op(xs: list[torch.Tensor]) -> list[torch.Tensor]:
    return [x.clone() for x in xs]  # devices without a compiler to stop: the values


@_barrier_op.register_kernel("tpu")
def _barrier_tpu(xs):
    if not xs:
        return []
    if any(x.device != xs[0].device or x.dtype not in _DT for x in xs):
        return [x.clone() for x in xs]  # one barrier per device; dtypes the IR lacks: the values
    return list(_barrier(*xs))


@_barrier_op.register_fake
def _(xs):
    return [torch.empty_like(x) for x in xs]


def _setup(ctx, inputs, output):
    ctx.like = [(x.shape, x.dtype, x.device) for x in inputs[0]]


def _backward(ctx, grads):
    return [g if g is not None else torch.zeros(s, dtype=dt, device=dev) for g, (s, dt, dev) in zip(grads, ctx.like)]


_barrier_op.register_autograd(_backward, setup_context=_setup)


def optimization_barrier(*tensors):
    """The tensors, unchanged, behind a point a compiler does not fuse or move work across.

    `optimization_barrier(x)` returns one tensor; `optimization_barrier(a, b)` a tuple;
    `optimization_barrier([a, b])` a list."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return type(tensors[0])(_barrier_op(list(tensors[0])))
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"[optimization_barrier] expects tensors; got {type(t).__name__}, expected torch.Tensor")
    outs = _barrier_op(list(tensors))
    return outs[0] if len(outs) == 1 else tuple(outs)
