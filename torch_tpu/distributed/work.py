"""The Work a tpu_dist collective returns: the inner gloo Work plus the staging that writes the
host results back into the tpu outputs. `wait()` waits for gloo, then queues the write-back on
the tpu stream, so every op queued after `wait()` (or after a synchronous collective) reads the
result; its future carries the outputs."""
import torch
from torch._C import _distributed_c10d as _c10d

from torch_tpu.distributed.staging import Staging


class CollectiveError(RuntimeError):
    """A tpu_dist collective failed (a peer died, timed out, or ranks disagreed on shapes)."""


def describe(backend, name: str) -> str:
    return f"[tpu_dist] {name} on rank {backend.rank()} of {backend.size()}"


class StagedWork(_c10d.Work):
    """`inner`: gloo's Work (None: nothing in flight); `post`: host fix-ups after the gloo op
    completes (e.g. AVG's division), before the write-back; `result`: what the future holds."""

    def __init__(self, what: str, inner, staging: Staging, result, post=None):
        super().__init__()
        self._what, self._inner, self._staging = what, inner, staging
        self._result, self._post = result, post
        self._done = False
        self._error = None

    def wait(self, timeout=None) -> bool:
        if self._error is not None:
            raise self._error
        if self._done:
            return True
        try:
            if self._inner is not None:
                if timeout is None or timeout.total_seconds() <= 0:
                    self._inner.wait()
                else:
                    self._inner.wait(timeout)
        except Exception as e:  # noqa: BLE001  (gloo raises RuntimeError / DistError subclasses)
            self._staging.drop()
            self._error = CollectiveError(f"{self._what} failed: {e}")
            raise self._error from e
        if self._post is not None:
            self._post()
        self._staging.finish()
        self._done = True
        return True

    def get_future(self) -> torch.futures.Future:
        """A completed future holding the outputs (waits for the collective first: a callback
        chained on it then runs on the caller's thread, in stream order)."""
        fut = torch.futures.Future()
        try:
            self.wait()
        except Exception as e:  # noqa: BLE001
            fut.set_exception(e)
            return fut
        fut.set_result(self._result)
        return fut

    def is_completed(self) -> bool:
        return self._done

    def is_success(self) -> bool:
        return self._done and self._error is None

    def exception(self):
        return self._error

    def result(self):
        self.wait()
        return self._result
