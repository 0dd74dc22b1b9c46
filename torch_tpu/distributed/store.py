"""A TCPStore that works on a PyTorch built without libuv (Debian's, the one in tools/in-env).

Several PyTorch call sites create a TCPStore without passing `use_libuv`, whose default is True,
and such a build refuses that ("use_libuv was requested but PyTorch was built without libuv
support") whatever USE_LIBUV says: init_process_group's env:// client under torchrun, and
torchrun's own rendezvous. `TCPStore` here falls back to the non-libuv server/client when libuv
is missing; with libuv it is PyTorch's TCPStore unchanged."""
import importlib

import torch.distributed as dist

_NO_LIBUV = "built without libuv"
ORIGINAL = dist.TCPStore


class TCPStore(ORIGINAL):
    def __init__(self, *args, **kwargs):
        try:
            super().__init__(*args, **kwargs)
        except RuntimeError as e:
            if _NO_LIBUV not in str(e):
                raise
            kwargs["use_libuv"] = False
            super().__init__(*args, **kwargs)


def install(modules=()) -> None:
    """Makes `modules` (and torch.distributed.rendezvous, where init_process_group's env:// and
    tcp:// stores are made) create the TCPStore above."""
    # importlib: the attribute torch.distributed.rendezvous is a function, not the module
    rendezvous = importlib.import_module("torch.distributed.rendezvous")
    for mod in (rendezvous, *modules):
        if getattr(mod, "TCPStore", None) is ORIGINAL:
            mod.TCPStore = TCPStore
