"""Agreement checks before a collective: every rank states what it is about to run (op, dtype,
shapes) and the ranks compare, so a mismatch raises a clear error on every rank instead of
gloo aborting the process ("Received data size doesn't match expected size") or hanging.

One small all_gather of an int64 fingerprint per collective; on a mismatch, a second one with
each rank's description for the message. Off with TORCH_TPU_DIST_CHECKS=0 (read once)."""
import os
import zlib

import torch

from torch_tpu.distributed.work import CollectiveError

ENABLED = os.environ.get("TORCH_TPU_DIST_CHECKS", "1") != "0"
_DESC_BYTES = 240


def describe_tensors(tensors) -> str:
    return ", ".join(f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}" for t in tensors)


def _all_gather_ints(gloo, values, world):
    mine = torch.tensor(values, dtype=torch.int64)
    outs = [torch.empty_like(mine) for _ in range(world)]
    gloo.allgather([outs], [mine]).wait()
    return [o.tolist() for o in outs]


def _all_gather_text(gloo, text, world):
    raw = text.encode()[:_DESC_BYTES].ljust(_DESC_BYTES, b"\0")
    mine = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
    outs = [torch.empty_like(mine) for _ in range(world)]
    gloo.allgather([outs], [mine]).wait()
    return [bytes(o.tolist()).rstrip(b"\0").decode(errors="replace") for o in outs]


def agree(backend, name: str, desc: str, extra=()) -> None:
    """Raises CollectiveError on every rank unless every rank passes the same `desc` for the
    collective `name` (and the same `extra` ints)."""
    if not ENABLED or backend.size() == 1:
        return
    fp = [zlib.crc32(f"{name}|{desc}".encode()), *extra]
    world = backend.size()
    got = _run(backend, name, lambda: _all_gather_ints(backend.gloo, fp, world))
    if all(g == got[0] for g in got):
        return
    descs = _run(backend, name, lambda: _all_gather_text(backend.gloo, f"{name}({desc})", world))
    per_rank = "; ".join(f"rank {r}: {d}" for r, d in enumerate(descs))
    raise CollectiveError(f"[tpu_dist] {name}: ranks disagree on the collective's tensors "
                          f"(rank {backend.rank()} of {world}); {per_rank}")


def agree_all_to_all(backend, dtype, in_splits, out_splits) -> None:
    """all_to_all_single: same dtype and row size everywhere, and what rank i sends to rank j
    (in_splits[j] on i) is what j expects from i (out_splits[i] on j)."""
    if not ENABLED or backend.size() == 1:
        return
    world = backend.size()
    fp = [zlib.crc32(str(dtype).encode()), *in_splits, *out_splits]
    got = _run(backend, "all_to_all_single", lambda: _all_gather_ints(backend.gloo, fp, world))
    bad = [f"rank {i} sends {got[i][1 + j]} elements to rank {j}, which expects {got[j][1 + world + i]}"
           for i in range(world) for j in range(world) if got[i][1 + j] != got[j][1 + world + i]]
    if any(g[0] != got[0][0] for g in got):
        bad.insert(0, "dtypes differ")
    if bad:
        raise CollectiveError(f"[tpu_dist] all_to_all_single: ranks disagree (rank {backend.rank()} of "
                              f"{world}): " + "; ".join(bad[:4]))


def _run(backend, name, fn):
    try:
        return fn()
    except CollectiveError:
        raise
    except Exception as e:  # noqa: BLE001
        raise CollectiveError(f"[tpu_dist] {name} on rank {backend.rank()} of {backend.size()} "
                              f"failed: {e}") from e
