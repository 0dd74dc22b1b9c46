"""Host staging of tpu tensors for a collective: downloads (ordered after the queued ops that
produce them), host buffers for outputs, and the write-back (queued on the stream, so later ops
see the result). CPU tensors pass through untouched: gloo reads and writes them in place."""
import torch


def is_tpu(t: torch.Tensor) -> bool:
    return t.device.type == "tpu"


def download(t: torch.Tensor) -> torch.Tensor:
    """A fresh contiguous CPU copy of tpu tensor `t`. Waits for the queued ops that produce `t`
    (a copy to CPU is a sync point of every eager mode; the fused window is flushed)."""
    h = torch.empty(t.shape, dtype=t.dtype)
    h.copy_(t)
    return h


class Staging:
    """The host side of one collective. `read` gives the host tensor gloo reads, `write` the one
    gloo writes, `inout` both; `finish` copies every written host tensor back into its tpu
    tensor (in stream order). One Staging serves one collective and is finished at most once."""

    def __init__(self):
        self._back = []  # (tpu tensor, host tensor)

    def read(self, t: torch.Tensor) -> torch.Tensor:
        return download(t) if is_tpu(t) else t

    def write(self, t: torch.Tensor) -> torch.Tensor:
        if not is_tpu(t):
            return t
        h = torch.empty(t.shape, dtype=t.dtype)
        self._back.append((t, h))
        return h

    def inout(self, t: torch.Tensor) -> torch.Tensor:
        if not is_tpu(t):
            return t
        h = download(t)
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
