"""torch_tpu: a native PyTorch backend for device "tpu".

`import torch_tpu` loads the native core (static registrations: guard, hooks, allocator,
kernels), names PrivateUse1 "tpu", installs `torch.tpu`, adds Tensor/Module/Storage `.tpu()`
methods and registers the Dynamo device interface (lazily: importing torch._dynamo costs
about 1.7 s, so the interface is registered when torch._dynamo.device_interface loads).
"""
__version__ = "0.1.0"  # as pyproject.toml

import importlib.machinery
import sys

import torch

from torch_tpu import _C  # noqa: F401  (runs the C++ static registrations)


def _register_device() -> None:
    import torch_tpu.device as mod

    existing = getattr(torch, "tpu", None)
    if existing is mod:  # already registered (e.g. the package was re-imported)
        return
    if existing is not None:
        raise ImportError(f"[torch_tpu] torch.tpu is already provided by {existing!r}; "
                          "another 'tpu' backend claimed PrivateUse1 (set TORCH_DEVICE_BACKEND_AUTOLOAD=0)")
    name = torch._C._get_privateuse1_backend_name()
    if name not in ("privateuseone", "tpu"):
        raise ImportError(f"[torch_tpu] PrivateUse1 is already named {name!r}; expected 'privateuseone' or 'tpu'")
    torch.utils.rename_privateuse1_backend("tpu")
    torch._register_device_module("tpu", mod)
    torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)


# --- Dynamo device interface -------------------------------------------------------------
def _register_dynamo_interface(di) -> None:
    """Registers our DeviceInterface for "tpu" in torch._dynamo.device_interface `di`.

    init_device_reg() registers torch's built-in TpuInterface (meant for Google's torch_tpu)
    on first use and would overwrite ours, so it is forced to run first."""
    import torch_tpu.device as tpu

    di.get_registered_device_interfaces()

    class TpuHostInterface(di.DeviceInterface):
        device = tpu.device
        Event = tpu.Event
        Stream = tpu.Stream

        class Worker:
            @staticmethod
            def set_device(device: int) -> None:
                tpu.set_device(device)

            @staticmethod
            def current_device() -> int:
                return tpu.current_device()

            @staticmethod
            def get_device_properties(device=None):
                return tpu.get_device_properties(device)

        current_device = staticmethod(tpu.current_device)
        set_device = staticmethod(tpu.set_device)
        maybe_exchange_device = staticmethod(tpu.maybe_exchange_device)
        exchange_device = staticmethod(tpu.exchange_device)
        device_count = staticmethod(tpu.device_count)
        is_available = staticmethod(tpu.is_available)
        stream = staticmethod(tpu.stream)
        current_stream = staticmethod(tpu.current_stream)
        set_stream = staticmethod(tpu.set_stream)
        synchronize = staticmethod(tpu.synchronize)
        get_device_properties = staticmethod(tpu.get_device_properties)
        memory_allocated = staticmethod(tpu.memory_allocated)

        @staticmethod
        def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
            tpu.set_stream(tpu.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type))

        @staticmethod
        def get_raw_stream(device_idx: int) -> int:
            return 0

        @staticmethod
        def get_compute_capability(device=None):
            return ""

        @staticmethod
        def is_bf16_supported(including_emulation: bool = False) -> bool:
            return True

        @staticmethod
        def is_triton_capable(device=None) -> bool:
            return False

    di.register_interface_for_device("tpu", TpuHostInterface)
    for i in range(tpu.device_count()):
        di.register_interface_for_device(f"tpu:{i}", TpuHostInterface)


def _lazy(target: str):
    """A hook `module -> None` calling "package.module:function" on the module, imported only
    when the hook runs (the hooked modules load late, or never)."""
    mod_name, fn_name = target.split(":")

    def hook(module) -> None:
        import importlib

        getattr(importlib.import_module(mod_name), fn_name)(module)

    return hook


class _DynamoHook:
    """A meta-path finder that runs our registration right after a torch module has executed
    (importing torch._dynamo costs ~1.7 s, so nothing is imported eagerly): the Dynamo device
    interface, the "tpu" compile backend, the routing of Inductor's compile_fx for tpu inputs
    (and a refusing Inductor code generator for "tpu" in place of torch's Pallas one),
    FlexAttention's tpu kernels, accelerate's device choice (accelerate_hooks), tpu kernels
    for fbgemm_gpu's jagged operators (fbgemm.py)."""

    HOOKS = {
        "torch._dynamo.device_interface": _register_dynamo_interface,
        "torch._dynamo.backends.registry": _lazy("torch_tpu._internal.compile:register_dynamo_backend"),
        "torch._inductor.compile_fx": _lazy("torch_tpu._internal.compile:route_inductor"),
        "torch._inductor.codegen.common": _lazy("torch_tpu._internal.compile:refuse_inductor_codegen"),
        "torch.nn.attention.flex_attention": _lazy("torch_tpu._internal.flex_attention:install"),
        "accelerate.state": _lazy("torch_tpu._internal.accelerate_hooks:patch_state"),
        "accelerate.utils.modeling": _lazy("torch_tpu._internal.accelerate_hooks:patch_modeling"),
        "fbgemm_gpu": _lazy("torch_tpu._internal.fbgemm:install"),
    }

    def find_spec(self, fullname, path, target=None):
        hook = self.HOOKS.get(fullname)
        if hook is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            hook(module)

        spec.loader.exec_module = exec_module
        return spec


def _install_dynamo_hook() -> None:
    for name, hook in _DynamoHook.HOOKS.items():
        if name in sys.modules:
            hook(sys.modules[name])
    if not any(isinstance(f, _DynamoHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _DynamoHook())


_register_device()
_install_dynamo_hook()

from torch_tpu._internal.execution_mode import (  # noqa: E402
    EagerMode,
    cpu_fallback_mode,
    eager_mode,
    get_eager_mode,
    set_eager_mode,
)
from torch_tpu._internal.metrics import metrics, metrics_report  # noqa: E402

__all__ = [
    "EagerMode", "set_eager_mode", "get_eager_mode", "eager_mode", "cpu_fallback_mode",
    "metrics", "metrics_report", "mark_dynamic",
]

from torch_tpu._internal import printing as _printing  # noqa: E402
from torch_tpu._internal.precision import Precision, precision, set_matmul_precision, get_matmul_precision  # noqa: E402

from torch_tpu._internal import backends as _backends  # noqa: E402
from torch_tpu._internal import precision as _precision  # noqa: E402

_printing.install()
_precision.install_torch_hooks()
_backends.install()
__all__ += ["Precision", "precision", "set_matmul_precision", "get_matmul_precision"]

from torch_tpu._internal import decompositions as _decompositions  # noqa: E402

_decompositions.install()

from torch_tpu._internal import storage_resize as _storage_resize  # noqa: E402

_storage_resize.install()

from torch_tpu._internal import multiprocessing as _multiprocessing  # noqa: E402

_multiprocessing.install()


def mark_dynamic(t, dim: int, min: int | None = None, max: int | None = None):
    """Eager bounded dynamism: `t` padded along `dim` to a bucket (TORCH_TPU_BUCKETS, the next
    power of two by default, at most `max`), its true size kept; ops on it compile once per
    bucket, not once per size. See docs/decisions/bounded-dynamism.md. Under torch.compile use
    torch._dynamo.mark_dynamic (or dynamic=True) with TORCH_TPU_BUCKETS instead."""
    from torch_tpu._internal import dynamic_eager

    return dynamic_eager.mark_dynamic(t, dim, min=min, max=max)


def set_runtime(name: str) -> None:
    """Chooses the runtime that executes tpu graphs ("host"; "pjrt" where built), before the
    first tpu op. Same as env TORCH_TPU_RUNTIME. Raises if another runtime is already in use."""
    _C._select_runtime(name)


def get_runtime() -> str:
    """The name of the runtime in use (chooses the default on first call)."""
    return _C._runtime_name()


__all__ += ["set_runtime", "get_runtime"]

if torch.distributed.is_available():  # registers the c10d backend "tpu_dist"
    from torch_tpu import distributed as _distributed  # noqa: E402,F401

_loaded = True  # read by torch_tpu._loader: the registration above is complete
