"""The torch.tpu device module (registered by `import torch_tpu`).

Same shape as torch.cuda for what PyTorch itself calls (device index, lazy init, RNG, AMP,
streams/events, memory) and for the torch.cuda habits of users (memory_summary, mem_get_info,
utilization, is_bf16_supported, get_device_capability, torch.tpu.amp). Each device has one
in-order command stream: Stream objects are distinct ids over that queue, so ordering between
them is always respected.
"""
import collections
import os
import sys
import time

import torch

from torch_tpu import _C
from torch_tpu._internal.precision import Precision, precision  # noqa: F401  (torch.tpu API)

_initialized = False


# --- device index ------------------------------------------------------------------------
def is_available() -> bool:
    """True when at least one tpu device exists. Never raises."""
    try:
        return device_count() > 0
    except Exception:
        return False


def device_count() -> int:
    return _C._device_count()


def current_device() -> int:
    return _C._current_device()


def _index(device=None, optional=True) -> int:
    """Device index of an int / str / torch.device / None (None and "tpu" = current)."""
    if device is None:
        if not optional:
            raise ValueError("[torch.tpu] a device is required; got None")
        return current_device()
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "tpu":
            raise ValueError(f"[torch.tpu] expected a tpu device; got {device}")
        return current_device() if device.index is None else device.index
    raise TypeError(f"[torch.tpu] expected int, str or torch.device; got {type(device).__name__}")


def set_device(device) -> None:
    idx = _index(device)
    if idx >= 0:
        _C._set_device(idx)


def exchange_device(device: int) -> int:
    return _C._exchange_device(_index(device))


def maybe_exchange_device(device: int) -> int:
    return _C._exchange_device(_index(device))


class device:
    """Context manager that makes `device` current; None or -1 is a no-op."""

    def __init__(self, device):
        self.idx = -1 if device is None else _index(device)
        self.prev = -1

    def __enter__(self):
        self.prev = _C._exchange_device(self.idx)

    def __exit__(self, *exc):
        if self.idx >= 0:
            _C._set_device(self.prev)
        return False


class device_of(device):
    """Makes the device of tensor `obj` current (no-op for non-tpu tensors)."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.device.type == "tpu" else -1)


def is_initialized() -> bool:
    return _initialized and not _is_in_bad_fork()


def _lazy_init() -> None:
    global _initialized
    if _is_in_bad_fork():
        raise RuntimeError("[torch.tpu] cannot use tpu in a forked subprocess: the parent process had "
                           "started its tpu command streams; use the 'spawn' or 'forkserver' start method")
    _initialized = True


def _is_in_bad_fork() -> bool:
    """True in a forked child of a process that had used tpu (as torch.cuda's): every tpu op
    there raises RuntimeError at once (the stream threads were not copied by fork)."""
    return _C._in_bad_fork()


def synchronize(device=None) -> None:
    """Waits until every command queued on `device` (default: current) has run."""
    _C._device_synchronize(_index(device))


def get_device_name(device=None) -> str:
    return "TPU (host runtime)"


def get_device_capability(device=None) -> tuple:
    """(major, minor) like torch.cuda's. (1, 0) for every tpu device: the op set and numerics
    (bf16/fp32, StableHLO semantics) of this release; code that gates on CUDA's compute
    capability should not read it as an sm_XY number."""
    _index(device)
    return (1, 0)


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """bfloat16 is a native tpu dtype (DEFAULT-precision matmuls already run in it)."""
    return True


_DeviceProperties = collections.namedtuple("_TpuDeviceProperties", ["name", "total_memory", "multi_processor_count"])


def get_device_properties(device=None):
    cap = _C._memory_capacity(_index(device))
    if cap == 0:  # unlimited: report the machine's memory
        cap = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return _DeviceProperties(get_device_name(device), cap, os.cpu_count() or 1)


# --- RNG: one counter-based (Philox) generator per device; state = 16 bytes --------------
default_generators = tuple(_C._get_default_generator(i) for i in range(device_count()))


def _get_generator(device) -> torch.Generator:
    return default_generators[_index(device)]


def manual_seed(seed) -> None:
    default_generators[current_device()].manual_seed(int(seed))


def manual_seed_all(seed) -> None:
    for g in default_generators:
        g.manual_seed(int(seed))


def seed() -> None:
    default_generators[current_device()].seed()


def seed_all() -> None:
    s = default_generators[current_device()].seed()
    for g in default_generators:
        g.manual_seed(s)


def initial_seed() -> int:
    return default_generators[current_device()].initial_seed()


def get_rng_state(device="tpu") -> torch.Tensor:
    """A CPU uint8 tensor: [:8] seed (uint64), [8:] offset (int64)."""
    return default_generators[_index(device)].get_state()


def set_rng_state(new_state: torch.Tensor, device="tpu") -> None:
    default_generators[_index(device)].set_state(new_state.clone())


def get_rng_state_all():
    return [g.get_state() for g in default_generators]


def set_rng_state_all(new_states) -> None:
    for i, s in enumerate(new_states):
        set_rng_state(s, i)


# --- memory --------------------------------------------------------------------------------
def memory_stats(device=None) -> "collections.OrderedDict[str, int]":
    return collections.OrderedDict(sorted(_C._memory_stats(_index(device)).items()))


def memory_allocated(device=None) -> int:
    return _C._memory_stats(_index(device))["allocated_bytes.all.current"]


def max_memory_allocated(device=None) -> int:
    return _C._memory_stats(_index(device))["allocated_bytes.all.peak"]


def memory_reserved(device=None) -> int:
    return _C._memory_stats(_index(device))["reserved_bytes.all.current"]


def max_memory_reserved(device=None) -> int:
    return _C._memory_stats(_index(device))["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device=None) -> None:
    _C._reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device=None) -> None:
    _C._reset_accumulated_memory_stats(_index(device))


def empty_cache() -> None:
    """Returns cached (freed, unused) blocks to the system."""
    _C._empty_cache()


def mem_get_info(device=None) -> tuple:
    """(free, total) bytes, like torch.cuda.mem_get_info. With TORCH_TPU_MEMORY_CAPACITY set,
    total is that capacity and free is what the allocator has not reserved of it; without it
    (the host runtime uses host memory) total is the machine's memory and free the memory the
    OS reports available."""
    idx = _index(device)
    cap = _C._memory_capacity(idx)
    if cap > 0:
        return max(cap - memory_reserved(idx), 0), cap
    page = os.sysconf("SC_PAGE_SIZE")
    return page * os.sysconf("SC_AVPHYS_PAGES"), page * os.sysconf("SC_PHYS_PAGES")


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A printable table of the allocator's statistics, in torch.cuda.memory_summary's format."""
    from torch_tpu._internal.memory_summary import format_summary

    idx = _index(device)
    return format_summary(memory_stats(idx), idx, abbreviated)


_util_samples: dict = {}


def utilization(device=None) -> int:
    """Percent of wall time the device's stream spent running commands since the previous
    call for this device (the first call: since torch_tpu was imported), like torch.cuda's
    utilization over its last sample period. 0 for a device that has run nothing."""
    idx = _index(device)
    now, busy = time.monotonic_ns(), _C._stream_busy_ns(idx)
    prev = _util_samples.get(idx)
    _util_samples[idx] = (now, busy)
    if prev is None:
        prev = (_start_ns, 0)
    wall = now - prev[0]
    return 0 if wall <= 0 else max(0, min(100, round(100 * (busy - prev[1]) / wall)))


_start_ns = time.monotonic_ns()


# --- AMP -----------------------------------------------------------------------------------
def get_amp_supported_dtype():
    return [torch.bfloat16, torch.float16, torch.float32]


from torch_tpu import amp  # noqa: E402  (torch.tpu.amp, as torch.cuda.amp)

sys.modules.setdefault("torch.tpu.amp", amp)


def __getattr__(name):
    if name == "ops":  # torch.tpu.ops (torch_tpu/ops.py), imported on first use
        from torch_tpu import ops

        sys.modules.setdefault("torch.tpu.ops", ops)
        return ops
    raise AttributeError(f"module 'torch.tpu' has no attribute {name!r}")


# --- streams and events ----------------------------------------------------------------------
class Stream(torch.Stream):
    """A tpu stream. All streams of a device share its one in-order queue."""

    def __new__(cls, device=None, priority=0, **kwargs):
        if "stream_id" in kwargs:
            return super().__new__(cls, priority=priority, **kwargs)
        return super().__new__(cls, device=torch.device("tpu", _index(device)), priority=priority)


class Event(torch.Event):
    """A tpu event: a position in its device's queue (with a timestamp if enable_timing)."""

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        return super().__new__(cls, device="tpu", enable_timing=enable_timing, blocking=blocking,
                               interprocess=interprocess)

    def elapsed_time(self, end_event) -> float:
        """Milliseconds between this event and `end_event` (both recorded with enable_timing)."""
        return _C._event_elapsed_time(self, end_event)


def _wrap(s: torch.Stream) -> Stream:
    return Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)


def current_stream(device=None) -> Stream:
    return _wrap(torch.accelerator.current_stream(_index(device)))


def default_stream(device=None) -> Stream:
    s = torch.accelerator.current_stream(_index(device))
    return Stream(stream_id=0, device_index=s.device_index, device_type=s.device_type)


def set_stream(stream: torch.Stream) -> None:
    if stream is not None:
        torch.accelerator.set_stream(stream)


class StreamContext:
    """Makes `stream` (and its device) current inside the block; None is a no-op."""

    def __init__(self, stream):
        self.stream = stream
        self.prev_dev = -1
        self.prev_stream = None

    def __enter__(self):
        if self.stream is None:
            return None
        self.prev_dev = _C._exchange_device(self.stream.device_index)
        self.prev_stream = torch.accelerator.current_stream(self.stream.device_index)
        torch.accelerator.set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            torch.accelerator.set_stream(self.prev_stream)
            _C._set_device(self.prev_dev)
        return False


def stream(stream) -> StreamContext:
    return StreamContext(stream)


# --- compile cache telemetry (TorchTPU's private names) ----------------------------------
def _get_cache_stats() -> dict:
    """num_cache_reqs, num_cache_hits and per_entry_stats (compilation_duration in us,
    read_count) of the compile cache shared by every execution mode."""
    return _C._get_cache_stats()


def _get_cache_requests() -> int:
    return _C._get_cache_stats()["num_cache_reqs"]


def _get_cache_hits() -> int:
    return _C._get_cache_stats()["num_cache_hits"]


def _get_cache_misses() -> int:
    s = _C._get_cache_stats()
    return s["num_cache_reqs"] - s["num_cache_hits"]


def _clear_cache() -> None:
    """Drops every compiled executable (pending work is finished first)."""
    _C._synchronize_all()
    _C._clear_cache()
