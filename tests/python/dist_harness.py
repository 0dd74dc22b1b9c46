"""Runs a test body in N spawned processes joined by a process group, for the distributed
tests: `spawn(fn, world, *args)` calls `fn(rank, world, *args)` in each rank after
init_process_group(backend) (a FileStore in a fresh directory), and re-raises the first rank's
failure with its traceback. A rank that is still running after `timeout` seconds fails the
test (the others are killed): a hang is a failure, never a stuck suite.

`fn` must be importable by name from a module on sys.path (spawned children re-import it)."""
import datetime
import os
import tempfile
import time

import torch.multiprocessing as mp

BACKEND = "cpu:gloo,tpu:tpu_dist"


def _entry(rank, world, store_dir, backend, pg_timeout, fn, args):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import torch.distributed as dist

    import torch_tpu  # noqa: F401  (registers the device and tpu_dist)

    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    dist.init_process_group(backend, init_method=f"file://{store_dir}/store", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=pg_timeout))
    try:
        fn(rank, world, *args)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def spawn(fn, world, *args, backend=BACKEND, timeout=300, pg_timeout=60):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    with tempfile.TemporaryDirectory(prefix="tpu_dist_") as d:
        ctx = mp.start_processes(_entry, args=(world, d, backend, pg_timeout, fn, args), nprocs=world,
                                 join=False, start_method="spawn")
        deadline = time.monotonic() + timeout
        while not ctx.join(timeout=max(0.1, min(5.0, deadline - time.monotonic()))):
            if time.monotonic() > deadline:
                for p in ctx.processes:
                    if p.is_alive():
                        p.kill()
                raise TimeoutError(f"[dist test] {fn.__name__} with {world} ranks still running after {timeout} s")
