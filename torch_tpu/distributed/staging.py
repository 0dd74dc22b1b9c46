"""Host staging of tpu tensors for a collective: downloads (ordered after the queued ops that
produce them), host buffers for outputs, and the write-back (queued on the stream, so later ops
see the result). CPU tensors pass through untouched: gloo reads and writes them in place."""
import torch


def is_tpu(t: torch.Tensor) -> bool:
    return t.device.type == "tpu"


def _staged(t: torch.Tensor, dtype) -> bool:
    return is_tpu(t) or (dtype is not None and dtype != t.dtype) or not t.is_contiguous()


HALF = (torch.bfloat16, torch.float16)
# what Debian's gloo accepts ("Invalid scalar type" otherwise)
GLOO_DTYPES = (torch.float32, torch.float64, torch.int8, torch.uint8, torch.int32, torch.int64, torch.bool)


def download(t: torch.Tensor, dtype=None) -> torch.Tensor:
    """A fresh contiguous CPU copy of `t` (in `dtype`, default t's). For a tpu tensor this waits
    for the queued ops that produce `t` (a copy to CPU is a sync point of every eager mode; the
    fused window is flushed)."""
    h = torch.empty(t.shape, dtype=dtype or t.dtype)
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


class Staging:
    """The host side of one collective. `read` gives the host tensor gloo reads, `write` the one
    gloo writes, `inout` both; `finish` copies every written host tensor back into its tpu
    tensor (in stream order). One Staging serves one collective and is finished at most once.
    `dtype`: the host tensor's dtype (default: t's); a contiguous CPU tensor of that dtype is
    used as is."""

    def __init__(self):
        self._back = []  # (tpu tensor, host tensor)

    def read(self, t: torch.Tensor, dtype=None) -> torch.Tensor:
        return download(t, dtype) if _staged(t, dtype) else t

    def write(self, t: torch.Tensor, dtype=None) -> torch.Tensor:
        if not _staged(t, dtype):
            return t
        h = torch.empty(t.shape, dtype=dtype or t.dtype)
        self._back.append((t, h))
        return h

    def inout(self, t: torch.Tensor, dtype=None) -> torch.Tensor:
        if not _staged(t, dtype):
            return t
        h = download(t, dtype)
        self._back.append((t, h))
        return h

    def finish(self) -> None:
        back, self._back = self._back, []
        with torch.no_grad():
            for t, h in back:
                t.copy_(h)

    def drop(self) -> None:
        """Forgets pending write-backs (the collective failed: its outputs keep their values)."""
        self._back = []
