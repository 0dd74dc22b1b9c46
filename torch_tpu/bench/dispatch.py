"""Host cost per op of strict eager on small tensors, against PyTorch CPU eager in the same
run: `python -m torch_tpu.bench dispatch [--iters N] [--rounds R]`.

Each round runs N ops back to back and then waits for the stream, so the figure is the
Python-side cost per op (the worker overlaps with it) plus any wait the stream adds. CPU and
tpu rounds alternate; each side's best round counts."""
import argparse
import math
import time

import torch

import torch_tpu  # noqa: F401
from torch_tpu.bench._report import Row

CASES = {
    "add 16x16": lambda a, b: a + b,
    "mul 16x16": lambda a, b: a * b,
    "matmul 8x8": lambda a, b: a[:8, :8] @ b[:8, :8],
    "sum 16x16": lambda a, b: a.sum(),
    "view+add chain": lambda a, b: (a.view(256) + b.view(256)).view(16, 16),
}


def _round(fn, a, b, iters, sync):
    t0 = time.perf_counter()
    for _ in range(iters):
        fn(a, b)
    sync()
    return (time.perf_counter() - t0) / iters * 1e6


def _both(fn, cpu, dev, iters, rounds):
    """Best round of each side, the sides' rounds interleaved (a busy spell of the shared
    machine then slows both, not one)."""
    sides = [(cpu, lambda: None), (dev, torch.tpu.synchronize)]
    for (a, b), sync in sides:
        for _ in range(200):
            fn(a, b)
        sync()
    best = [float("inf"), float("inf")]
    for _ in range(rounds):
        for i, ((a, b), sync) in enumerate(sides):
            best[i] = min(best[i], _round(fn, a, b, iters, sync))
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m torch_tpu.bench dispatch")
    ap.add_argument("--iters", type=int, default=2000, help="ops per timed round")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds per side; the best counts")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    a, b = torch.randn(16, 16), torch.randn(16, 16)
    ta, tb = a.to("tpu"), b.to("tpu")
    print(f"strict-eager host cost per op (us), torch {torch.__version__}, "
          f"{torch.get_num_threads()} CPU threads, best of {args.rounds} interleaved rounds x {args.iters}")
    print(f"{'case':<16} {'cpu eager':>10} {'tpu strict':>11} {'ratio':>7}")
    ratios, rows = [], []
    for name, fn in CASES.items():
        c, t = _both(fn, (a, b), (ta, tb), args.iters, args.rounds)
        ratios.append(t / c)
        rows.append(Row("dispatch", f"{name}, strict eager", t, c, unit="us/op"))
        print(f"{name:<16} {c:10.2f} {t:11.2f} {t / c:7.2f}")
    geo = 1.0
    for r in ratios:
        geo *= r
    geo = geo ** (1 / len(ratios))
    print(f"geomean ratio tpu/cpu: {geo:.2f} (goal <= 1.0, issue 17)")
    gt, gc = (math.prod(r.ours if k else r.pytorch for r in rows) ** (1 / len(rows)) for k in (1, 0))
    rows.append(Row("dispatch", "geomean of the cases, strict eager", gt, gc, unit="us/op", goal=1.0,
                    note="goal (issue 17): host cost per op at most PyTorch CPU's"))
    return rows
