"""Eager execution modes, with TorchTPU's names.

DEFER_NEVER (strict, default): ops are queued and run asynchronously, in order.
DEFER_NEVER_AND_LAUNCH_BLOCKING (debug): each op finishes before the call returns.
DEFER_AND_FUSE (fused): ops are recorded into a window and run as one fused graph at the
next sync point (or when the window fills); also env TORCH_TPU_DEFER_AND_FUSE=1.
"""
import contextlib
import enum

from torch_tpu import _C


class EagerMode(enum.Enum):
    DEFER_AND_FUSE = 0
    DEFER_NEVER = 1
    DEFER_NEVER_AND_LAUNCH_BLOCKING = 2


def _check(mode):
    if not isinstance(mode, EagerMode):
        raise TypeError(f"[eager_mode] expected an EagerMode; got {mode!r}")
    return mode.value


def get_eager_mode() -> EagerMode:
    """The mode in effect on this thread."""
    return EagerMode(_C._get_eager_mode())


def set_eager_mode(mode: EagerMode) -> None:
    """Sets the process-wide mode (pending work is finished first): global, like
    torch.set_default_dtype and TorchTPU's set_eager_mode, so a mode set in one thread is the
    mode of every thread (DataLoader threads, autograd workers) that has no `eager_mode(...)`
    block of its own. For one thread only, use the `eager_mode(mode)` context manager."""
    v = _check(mode)
    _C._synchronize_all()
    _C._set_eager_mode(v)


@contextlib.contextmanager
def eager_mode(mode: EagerMode):
    """Thread-local mode for the duration of the block; the autograd threads that run a
    backward started in the block use it too."""
    v = _check(mode)
    _C._synchronize_all()
    _C._push_thread_eager_mode(v)
    try:
        yield
    finally:
        _C._synchronize_all()
        _C._pop_thread_eager_mode()


@contextlib.contextmanager
def cpu_fallback_mode(enabled: bool = True):
    """Runs ops without a tpu lowering on CPU (warned once per op, counted in metrics)."""
    prev = _C._set_cpu_fallback(bool(enabled))
    try:
        yield
    finally:
        _C._set_cpu_fallback(prev)
