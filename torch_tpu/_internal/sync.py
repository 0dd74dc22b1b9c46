"""Deferred-graph introspection (TorchTPU names): torch_tpu._internal.sync.computation_mlir."""
import torch

from torch_tpu import _C


def computation_mlir(*tensors: torch.Tensor) -> str:
    """The pending (deferred, not yet run) graph that computes `tensors`, as StableHLO text
    printed from our IR. With no tensors: every live pending value. Fused mode only."""
    dev = tensors[0].device.index if tensors else torch.tpu.current_device()
    return _C._pending_stablehlo(dev or 0, list(tensors))


def pending_ops(device: int = 0) -> int:
    """Ops recorded in the device's window and not yet run."""
    return _C._pending_size(device)[0]


def flush(device: int = 0) -> None:
    """Runs the device's pending window now (without waiting for it)."""
    _C._flush(device)


def cluster_count(*tensors: torch.Tensor) -> int:
    """How many fused kernels (clusters) the host runtime would run for the pending graph
    that computes `tensors` (all live pending values when none are given)."""
    dev = tensors[0].device.index if tensors else torch.tpu.current_device()
    return _C._pending_cluster_count(dev or 0, list(tensors))
