"""`torch.backends.tpu`: backend flags for device "tpu", in the style of torch.backends.cuda.

allow_excess_precision (bool, default True): permission for the backend to compute with more
precision than the TPU would, the way XLA's `xla_allow_excess_precision` lets the compiler
keep f32 intermediates between fused bf16 ops instead of rounding after each. Today it is
stored and reported only; what the host runtime does regardless of it:
  * bf16/f16 elementwise ops compute in f32 and round once per op (no skipped roundings);
  * HIGHEST matmuls run as native f32 GEMM, which is at least as precise as the TPU's
    6-pass bf16 emulation (docs/decisions/gemm.md);
  * HIGH computes the same exact bf16 products as the 3 TPU passes, summed in f32.
A future fused runtime may consult it before dropping intermediate roundings.
"""
import sys
import types

import torch


class _TpuBackend(types.ModuleType):
    def __init__(self):
        super().__init__("torch.backends.tpu", __doc__)
        self._allow_excess_precision = True

    @property
    def allow_excess_precision(self) -> bool:
        return self._allow_excess_precision

    @allow_excess_precision.setter
    def allow_excess_precision(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"[torch.backends.tpu] allow_excess_precision expects a bool; got {type(value).__name__}")
        self._allow_excess_precision = value

    def __repr__(self) -> str:
        return f"<torch.backends.tpu allow_excess_precision={self._allow_excess_precision}>"


def install() -> None:
    """Installs the config object as torch.backends.tpu (idempotent)."""
    if isinstance(getattr(torch.backends, "tpu", None), _TpuBackend):
        return
    mod = _TpuBackend()
    torch.backends.tpu = mod
    sys.modules["torch.backends.tpu"] = mod
