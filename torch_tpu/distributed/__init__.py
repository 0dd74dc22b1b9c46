"""torch_tpu.distributed: the c10d backend for device "tpu" (registered by `import torch_tpu`).

    dist.init_process_group("tpu_dist")               # tpu and cpu tensors
    dist.init_process_group("cpu:gloo,tpu:tpu_dist")  # the same, gloo for cpu
    dist.init_process_group()                          # "tpu" is the accelerator: tpu_dist

"tpu" is an alias of "tpu_dist" (TorchTPU registers both). DDP, FSDP2 (fully_shard), DTensor
(DeviceMesh("tpu", ...)) and torch.distributed._functional_collectives run on it. See
torch_tpu/distributed/README.md.
"""
import torch
import torch.distributed as dist

from torch_tpu.distributed import store as _store
from torch_tpu.distributed.backend import NAME, TpuDistBackend
from torch_tpu.distributed.work import CollectiveError

__all__ = ["TpuDistBackend", "CollectiveError", "NAME", "register"]

_ALIASES = (NAME, "tpu")


def _create(store, rank, size, timeout):
    # Each process drives its own tpu:0 (one device per process, as TorchTPU). Marking the
    # device initialized keeps DeviceMesh from calling torch.tpu.set_device(LOCAL_RANK).
    torch.tpu._lazy_init()
    return TpuDistBackend(store, rank, size, timeout)


def register() -> None:
    """Registers "tpu_dist" and its alias "tpu" with c10d (idempotent). Devices: "tpu" (the
    default backend for it) and "cpu" (so a single-name group also serves CPU tensors; the
    default for cpu stays gloo)."""
    for name in _ALIASES:
        if name.upper() in dist.Backend._plugins:
            continue
        dist.Backend.register_backend(name, _create, devices=["cpu", "tpu"])
    dist.Backend.default_device_backend_map["tpu"] = NAME


register()
_store.install()  # init_process_group under torchrun on a PyTorch without libuv (store.py)
