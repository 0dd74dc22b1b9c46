"""python -m torch_tpu.bench dist [--world 2] [--max-mib 64] [--rounds 3]

all_reduce (SUM, float32) bus bandwidth for 1 KiB .. 64 MiB with 2 processes, in one run:
gloo on CPU tensors, tpu_dist on tpu tensors (host staging + the same gloo underneath + the
agreement check), and tpu_dist with the check off (TORCH_TPU_DIST_CHECKS=0). Bus bandwidth =
bytes / time * 2 (n - 1) / n (nccl-tests' convention). Each round times every variant in
turn; the fastest round counts (other processes share this machine). tpu times include the
stream synchronize after the last call.

Then a DDP train step of the README's GPT (examples/gpt.py, 2 layers, width 128, ctx 64,
batch 8 per rank): single process, DDP with both ranks stepping, and DDP inside no_sync()
(same work, no gradient all_reduce), so the sync's cost is the difference of the last two.
"""
import argparse
import datetime
import os
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from torch_tpu.bench._report import Row

_KIB = 1024


def _sizes(max_mib):
    s, out = _KIB, []
    while s <= max_mib * _KIB * _KIB:
        out.append(s)
        s *= 4
    return out


def _fmt_size(n):
    return f"{n // _KIB} KiB" if n < _KIB * _KIB else f"{n // (_KIB * _KIB)} MiB"


def _time_allreduce(t, iters, sync):
    dist.all_reduce(t)
    sync()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t)
    sync()
    return (time.perf_counter() - t0) / iters


def _bandwidth(rank, world, sizes, rounds):
    from torch_tpu.distributed import checks

    variants = ("gloo cpu", "tpu_dist", "tpu_dist, no check")
    best = {(v, n): float("inf") for v in variants for n in sizes}
    for _ in range(rounds):
        for n in sizes:
            iters = max(2, min(50, (4 * _KIB * _KIB) // n))
            for v in variants:
                dev = "cpu" if v == "gloo cpu" else "tpu"
                t = torch.ones(n // 4, device=dev)
                checks.ENABLED = v != "tpu_dist, no check"
                sync = torch.tpu.synchronize if dev == "tpu" else (lambda: None)
                best[v, n] = min(best[v, n], _time_allreduce(t, iters, sync))
    checks.ENABLED = True
    return variants, best


def _ddp_step(rank, world, steps):
    import copy
    import importlib.util
    import pathlib

    from torch.nn.parallel import DistributedDataParallel as DDP

    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "gpt.py"
    spec = importlib.util.spec_from_file_location("gpt_example", path)
    gpt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpt)
    torch.manual_seed(0)
    chars, data = gpt.load_data()
    cfg = gpt.Config(vocab=len(chars.chars), ctx=64, layers=2, width=128)
    base = gpt.GPT(cfg)
    gen = torch.Generator().manual_seed(rank)
    x, y = (b.to("tpu") for b in gpt.get_batch(data, 8, cfg.ctx, gen))

    def timed(model, ctx):
        opt = gpt.make_optimizer(model.module if isinstance(model, DDP) else model)
        best = float("inf")
        for r in range(3):
            t0 = time.perf_counter()
            for _ in range(steps if r else 1):
                with ctx():
                    gpt.train_step(model, opt, x, y)
            torch.tpu.synchronize()
            if r:
                best = min(best, (time.perf_counter() - t0) / steps)
        return best

    import contextlib

    single = float("nan")
    if rank == 0:
        single = timed(copy.deepcopy(base).to("tpu"), contextlib.nullcontext)
    dist.barrier()
    ddp = DDP(copy.deepcopy(base).to("tpu"))
    t_ddp = timed(ddp, contextlib.nullcontext)
    t_nosync = timed(ddp, ddp.no_sync)
    return single, t_ddp, t_nosync


def _worker(rank, world, store, sizes, rounds, steps, out):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import torch_tpu  # noqa: F401

    dist.init_process_group("cpu:gloo,tpu:tpu_dist", init_method=f"file://{store}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=300))
    variants, best = _bandwidth(rank, world, sizes, rounds)
    ddp = _ddp_step(rank, world, steps)
    if rank == 0:
        torch.save({"variants": variants, "best": best, "ddp": ddp}, out)
    dist.barrier()
    dist.destroy_process_group()


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m torch_tpu.bench dist")
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--max-mib", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ddp-steps", type=int, default=5)
    args = ap.parse_args(argv)
    sizes = _sizes(args.max_mib)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    with tempfile.TemporaryDirectory(prefix="bench_dist_") as d:
        out = os.path.join(d, "result.pt")
        mp.spawn(_worker, args=(args.world, os.path.join(d, "store"), sizes, args.rounds, args.ddp_steps, out),
                 nprocs=args.world)
        res = torch.load(out)
    variants, best = res["variants"], res["best"]
    factor = 2 * (args.world - 1) / args.world
    print(f"all_reduce SUM float32, {args.world} processes: bus bandwidth GB/s (time per call)")
    print(f"{'size':>8} | " + " | ".join(f"{v:>22}" for v in variants))
    for n in sizes:
        cells = [f"{n * factor / best[v, n] / 1e9:8.3f} ({best[v, n] * 1e6:9.0f} us)" for v in variants]
        print(f"{_fmt_size(n):>8} | " + " | ".join(f"{c:>22}" for c in cells))
    single, t_ddp, t_nosync = res["ddp"]
    print(f"\nGPT train step (2 layers, width 128, ctx 64, batch 8 per rank), ms:")
    print(f"  single process           {single * 1e3:8.1f}")
    print(f"  DDP, {args.world} ranks             {t_ddp * 1e3:8.1f}")
    print(f"  DDP inside no_sync()     {t_nosync * 1e3:8.1f}   (gradient sync: {(t_ddp - t_nosync) * 1e3:.1f} ms/step)")
    n = sizes[-1]
    return [Row("dist", f"all_reduce {_fmt_size(n)}, {args.world} processes: tpu_dist vs gloo on CPU tensors",
                n * factor / best["tpu_dist", n] / 1e9, n * factor / best["gloo cpu", n] / 1e9, unit="GB/s",
                higher_is_better=True)]
