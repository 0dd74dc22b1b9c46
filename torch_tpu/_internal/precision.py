"""Matmul precision for float32 operands on tpu, with TorchTPU's names.

DEFAULT: one bf16 pass (inputs rounded to bf16, f32 accumulation) -- the TPU default.
HIGH: three bf16 passes (hi*hi + hi*lo + lo*hi), about 16 bits.
HIGHEST: float32-faithful.

The setting is process-wide (also seen by the autograd thread that runs backward); see
docs/decisions/precision-scope.md. `torch.set_float32_matmul_precision` also sets it
("medium" -> DEFAULT, "high" -> HIGH, "highest" -> HIGHEST) after calling through to
PyTorch's own setter, so CPU/CUDA keep their behaviour. PyTorch's default is "highest";
tpu's default stays DEFAULT until the user calls either setter.
"""
import contextlib
import enum
import functools

import torch

from torch_tpu import _C


class Precision(enum.Enum):
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2


_BY_NAME = {"default": Precision.DEFAULT, "medium": Precision.DEFAULT,
            "high": Precision.HIGH, "highest": Precision.HIGHEST}


def _as_precision(p) -> Precision:
    if isinstance(p, Precision):
        return p
    if isinstance(p, str) and p.lower() in _BY_NAME:
        return _BY_NAME[p.lower()]
    raise ValueError(f"[precision] got {p!r}, expected torch.tpu.Precision.DEFAULT, HIGH or HIGHEST")


def get_matmul_precision() -> Precision:
    return Precision(_C._get_matmul_precision())


def set_matmul_precision(p) -> None:
    """Sets the matmul precision ("default" | "high" | "highest" or a Precision)."""
    _C._set_matmul_precision(_as_precision(p).value)


@contextlib.contextmanager
def precision(p):
    """`with torch.tpu.precision(torch.tpu.Precision.HIGHEST): ...`"""
    new = _as_precision(p)
    old = get_matmul_precision()
    set_matmul_precision(new)
    try:
        yield
    finally:
        set_matmul_precision(old)


# torch.set_float32_matmul_precision names -> tpu precision.
_TORCH_NAMES = {"medium": Precision.DEFAULT, "high": Precision.HIGH, "highest": Precision.HIGHEST}


def install_torch_hooks() -> None:
    """Wraps torch.set_float32_matmul_precision so it also sets the tpu precision.

    The original runs first (it validates the name and sets CPU/CUDA); then the tpu setting
    follows. torch.get_float32_matmul_precision is left as is: it reports PyTorch's value,
    which equals the tpu one whenever the user set it through torch. Idempotent."""
    original = torch.set_float32_matmul_precision
    if getattr(original, "_torch_tpu_wrapped", False):
        return

    @functools.wraps(original)
    def set_float32_matmul_precision(precision: str) -> None:
        original(precision)  # warns and changes nothing on an unknown name; so do we
        if precision in _TORCH_NAMES:
            set_matmul_precision(_TORCH_NAMES[precision])

    set_float32_matmul_precision._torch_tpu_wrapped = True
    torch.set_float32_matmul_precision = set_float32_matmul_precision
