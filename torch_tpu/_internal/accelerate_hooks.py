"""accelerate finds tpu as it finds cuda / npu / xpu: `Accelerator().device` (and so the
Hugging Face Trainer's device) and `from_pretrained(..., device_map="auto")`.

accelerate 1.14 lists its devices by name (mps, mlu, sdaa, musa, npu, hpu, cuda, xpu, neuron;
"tpu" there means torch_xla). When device "tpu" is PyTorch's current accelerator, two of its
functions answer for it, patched when their modules load (torch_tpu/__init__.py's import hook):
  * `PartialState.default_device` (accelerate.state): tpu, where it would say cpu;
  * `get_max_memory` (accelerate.utils.modeling): the tpu devices' free memory
    (`torch.tpu.mem_get_info`, integer keys, as accelerate keys cuda devices) before cpu, so
    `infer_auto_device_map` / `device_map="auto"` fill tpu first; integer device ids mean tpu
    devices here because `torch.device(0)` is the current accelerator's.
Multi-process accelerate launches (LOCAL_RANK set) are not mapped yet: accelerate has no
DistributedType for a PrivateUse1 device (docs/decisions/ecosystem.md)."""
import functools

import torch


def _tpu_is_accelerator() -> bool:
    acc = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    return acc is not None and acc.type == "tpu"


def patch_state(state) -> None:
    cls = state.PartialState
    orig = cls.__dict__.get("default_device")
    if orig is None or getattr(orig.fget, "_torch_tpu", False):
        return

    def default_device(self) -> torch.device:
        if _tpu_is_accelerator():
            return torch.device("tpu", torch.tpu.current_device())
        return orig.fget(self)

    default_device._torch_tpu = True
    default_device.__doc__ = orig.fget.__doc__
    cls.default_device = property(default_device)


def patch_modeling(modeling) -> None:
    orig = modeling.get_max_memory
    if getattr(orig, "_torch_tpu", False):
        return

    @functools.wraps(orig)
    def get_max_memory(max_memory=None):
        if not _tpu_is_accelerator():
            return orig(max_memory)
        import psutil

        n = torch.tpu.device_count()
        if max_memory is None:
            out = {i: torch.tpu.mem_get_info(i)[0] for i in range(n)}
            out["cpu"] = psutil.virtual_memory().available
            return out
        out = {}
        for key, value in max_memory.items():
            if isinstance(value, str):
                value = modeling.convert_file_size_to_int(value)
            if isinstance(key, int) and not 0 <= key < n:
                raise ValueError(f"[accelerate tpu] max_memory names device {key}; expected a tpu index in "
                                 f"[0, {n}) (torch.tpu.device_count()), 'cpu' or 'disk'")
            out[key] = value
        ints = sorted(k for k in out if isinstance(k, int))
        others = [k for k in ("mps", "cpu", "disk") if k in out]
        return {k: out[k] for k in ints + others}

    get_max_memory._torch_tpu = True
    modeling.get_max_memory = get_max_memory
