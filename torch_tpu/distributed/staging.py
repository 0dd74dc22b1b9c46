"""Host staging of tpu tensors for a collective: downloads (ordered after the queued ops that
produce them), host buffers for outputs, and the write-back (queued on the stream, so later ops
see the result). Contiguous CPU tensors pass through untouched: gloo reads and writes them in
place.

On the host runtime a contiguous tpu tensor needs no staging: its memory is host memory, and
gloo reads and writes it in place through a CPU alias (`aliasable`; all_reduce of 16 MiB: the
download and the write-back were ~20% of its time). Ops queued after the collective and before
`wait()` must not use its tensors (as with NCCL on a side stream).

Host buffers come from a small pool (`_Pool`): a fresh large CPU allocation is page-faulted on
first touch, which cost more than the copy itself (64 MiB: ~3x). A buffer returns to the pool
when its collective finished: the write-back (a cpu->tpu copy) snapshots the host data at the
call, so the buffer is free once it returns."""
import os
import threading

import torch

HALF = (torch.bfloat16, torch.float16)
# what Debian's gloo accepts ("Invalid scalar type" otherwise)
GLOO_DTYPES = (torch.float32, torch.float64, torch.int8, torch.uint8, torch.int32, torch.int64, torch.bool)


def is_tpu(t: torch.Tensor) -> bool:
    return t.device.type == "tpu"


def _staged(t: torch.Tensor, dtype) -> bool:
    return is_tpu(t) or (dtype is not None and dtype != t.dtype) or not t.is_contiguous()


class _Pool:
    """Idle host buffers by (dtype, numel), at most `cap` bytes in all. Thread safe."""

    def __init__(self, cap: int):
        self.cap, self.bytes = cap, 0
        self.free: dict = {}
        self.lock = threading.Lock()

    def take(self, shape, dtype) -> torch.Tensor:
        n = 1
        for s in shape:
            n *= s
        with self.lock:
            lst = self.free.get((dtype, n))
            if lst:
                h = lst.pop()
                self.bytes -= h.nbytes
                return h.view(shape)
        return torch.empty(shape, dtype=dtype)

    def give(self, h: torch.Tensor) -> None:
        if h.nbytes < 4096:  # small ones are cheap to allocate
            return
        with self.lock:
            if self.bytes + h.nbytes <= self.cap:
                self.free.setdefault((h.dtype, h.numel()), []).append(h.reshape(-1))
                self.bytes += h.nbytes

    def clear(self) -> None:
        with self.lock:
            self.free.clear()
            self.bytes = 0


POOL = _Pool(256 << 20)


def download(t: torch.Tensor, dtype=None, into=None) -> torch.Tensor:
    """A contiguous CPU copy of `t` (in `dtype`, default t's), in `into` if given. For a tpu
    tensor this waits for the queued ops that produce `t` (a copy to CPU is a sync point of
    every eager mode; the fused window is flushed)."""
    h = torch.empty(t.shape, dtype=dtype or t.dtype) if into is None else into
    h.copy_(t)
    return h


def wire(h: torch.Tensor) -> torch.Tensor:
    """The view of host tensor `h` gloo moves: dtypes gloo lacks (bf16, f16, int16, ...) as
    their bytes, one trailing byte dim added so dim 0 (all_to_all's splits) is kept. Exact;
    only for collectives that do not reduce."""
    return h if h.dtype in GLOO_DTYPES else h.unsqueeze(-1).view(torch.uint8)


def reduce_dtype(dt: torch.dtype):
    """The host dtype a reduction runs in: float32 for 16-bit floats (gloo cannot add them;
    the result is rounded once on the way back), int32 for int16, else None (its own)."""
    if dt in HALF:
        return torch.float32
    return torch.int32 if dt == torch.int16 else None


_ALIAS_ON = os.environ.get("TORCH_TPU_DIST_ALIAS", "1") != "0"


def _host_runtime() -> bool:
    import torch_tpu
    return torch_tpu._C._runtime_name() == "host"


def aliasable(t: torch.Tensor, dtype=None) -> bool:
    """Whether gloo can use tpu tensor `t`'s memory in place: on the host runtime tpu memory is
    host memory, so a contiguous tensor needing no dtype change is read and written where it is
    (no download, no write-back; `TORCH_TPU_DIST_ALIAS=0` stages every tensor)."""
    return (is_tpu(t) and (dtype is None or dtype == t.dtype) and t.is_contiguous() and _host_runtime()
            and _ALIAS_ON)


class Staging:
    """The host side of one collective. `read` gives the host tensor gloo reads, `write` the one
    gloo writes, `inout` both, `copy` a private host copy (gloo may change it; never written
    back); `finish` copies every written host tensor back into its tensor (in stream order)
    and returns the host buffers to the pool. One Staging serves one collective and is
    finished at most once. `dtype`: the host tensor's dtype (default: t's); a contiguous CPU
    tensor of that dtype is used as is (except by `copy`)."""

    def __init__(self, alias: bool = True):
        self._back = []  # (tpu tensor, host tensor)
        self._owned = []  # host buffers from the pool
        self._synced = False
        # False where the collective computes on its host tensors (AVG's division, PREMUL_SUM's
        # scaling): that math runs on host copies, never as CPU kernels on tpu memory.
        self._alias_ok = alias

    def _buffer(self, t, dtype):
        h = POOL.take(tuple(t.shape), dtype or t.dtype)
        self._owned.append(h)
        return h

    def _alias(self, t, dtype):
        """t's memory as a CPU tensor when gloo may use it in place (`aliasable`), once the ops
        queued before the collective have run (a sync point, as a download is); else None."""
        if not (self._alias_ok and aliasable(t, dtype)):
            return None
        if not self._synced:
            torch.tpu.synchronize(t.device)
            self._synced = True
        import torch_tpu
        return torch_tpu._C._host_alias(t)

    def read(self, t: torch.Tensor, dtype=None) -> torch.Tensor:
        if (a := self._alias(t, dtype)) is not None:
            return a
        return download(t, dtype, self._buffer(t, dtype)) if _staged(t, dtype) else t

    def copy(self, t: torch.Tensor, dtype=None) -> torch.Tensor:
        return download(t, dtype, self._buffer(t, dtype))

    def write(self, t: torch.Tensor, dtype=None) -> torch.Tensor:
        if (a := self._alias(t, dtype)) is not None:
            return a
        if not _staged(t, dtype):
            return t
        h = self._buffer(t, dtype)
        self._back.append((t, h))
        return h

    def inout(self, t: torch.Tensor, dtype=None) -> torch.Tensor:
        if (a := self._alias(t, dtype)) is not None:
            return a
        if not _staged(t, dtype):
            return t
        h = download(t, dtype, self._buffer(t, dtype))
        self._back.append((t, h))
        return h

    def finish(self) -> None:
        back, self._back = self._back, []
        with torch.no_grad():
            for t, h in back:
                t.copy_(h)  # cpu -> tpu snapshots h: the buffer is free when this returns
        owned, self._owned = self._owned, []
        for h in owned:
            POOL.give(h)

    def drop(self) -> None:
        """Forgets pending write-backs (the collective failed: staged outputs keep their values,
        aliased ones hold whatever gloo wrote, as NCCL's outputs do; its host buffers are not
        reused, gloo may still hold them)."""
        self._back, self._owned = [], []
