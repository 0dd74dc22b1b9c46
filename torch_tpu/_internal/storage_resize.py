"""UntypedStorage.resize_ on a tpu storage flushes the device's fused window first.

FSDP2 frees and re-allocates parameter memory with `untyped_storage().resize_(n)`. In fused
mode (DEFER_AND_FUSE) ops recorded in the window may still read or write that storage; the
resize swaps its buffer (csrc/device/hooks.cpp, which sits below exec/ and cannot see the
window), so they would run against a buffer of the wrong size ("[host run] input 4 has no
data"). Flushing queues them first; the resize's copy is then ordered after them on the
stream. In the other modes nothing is pending and the flush is a no-op.
"""
import torch

from torch_tpu import _C


def install() -> None:
    original = torch.UntypedStorage.resize_
    if getattr(original, "_torch_tpu_flushes", False):
        return

    def resize_(self, size):
        if self.device.type == "tpu":
            _C._flush(self.device.index if self.device.index is not None else torch.tpu.current_device())
        return original(self, size)

    resize_._torch_tpu_flushes = True
    resize_.__doc__ = original.__doc__
    torch.UntypedStorage.resize_ = resize_
