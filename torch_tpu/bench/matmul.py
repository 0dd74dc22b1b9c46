"""python -m torch_tpu.bench matmul [--quick] [--out PNG] [--shapes NAME,...]

GFLOP/s of f32 matmul on tpu at DEFAULT / HIGH / HIGHEST next to PyTorch CPU fp32 (and
bf16, for reference), timed in one run and interleaved (each round times every variant for
~50 ms; the fastest call counts, which discounts other processes on a shared machine; tpu
calls include dispatch and a synchronize), plus the
componentwise relative error max |C - C64| / (|A| @ |B|) of each against float64.

Threads: both sides use their defaults (printed). For a same-thread comparison run with
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 (read at start by PyTorch and by our runtime).
Writes a bar chart (matplotlib).
"""
import argparse
import math
import os
import time

import torch

import torch_tpu
from torch_tpu import Precision
from torch_tpu._internal import progress
from torch_tpu.bench import settle
from torch_tpu.bench._report import Row

# name: (batch or None, M, K, N)
SHAPES = {
    "sq256": (None, 256, 256, 256), "sq512": (None, 512, 512, 512),
    "sq1024": (None, 1024, 1024, 1024), "sq2048": (None, 2048, 2048, 2048),
    "attn_scores": (12, 256, 64, 256),   # [B*heads, T, d] @ [B*heads, d, T]
    "attn_values": (12, 256, 256, 64),
    "mlp_up": (None, 512, 768, 3072),    # tokens x hidden -> 4*hidden
    "decode": (None, 8, 1024, 4096),     # skinny: a few tokens through a projection
}
QUICK = ["sq256", "sq1024", "attn_scores", "decode"]
VARIANTS = ["tpu DEFAULT", "tpu HIGH", "tpu HIGHEST", "torch fp32", "torch bf16"]


def _mm(a, b):
    return torch.bmm(a, b) if a.dim() == 3 else torch.mm(a, b)


def _make(shape):
    bt, m, k, n = shape
    g = torch.Generator().manual_seed(0)
    lead = (bt,) if bt else ()
    return torch.randn(*lead, m, k, generator=g), torch.randn(*lead, k, n, generator=g)


def _runner(variant, a, b):
    if variant.startswith("tpu"):
        mode = Precision[variant.split()[1]]
        ta, tb = a.to("tpu"), b.to("tpu")

        def run():
            with torch_tpu.precision(mode):
                out = _mm(ta, tb)
            torch.tpu.synchronize()
            return out
        return run
    if variant == "torch bf16":
        ba, bb = a.bfloat16(), b.bfloat16()
        return lambda: _mm(ba, bb)
    return lambda: _mm(a, b)


def _error(out, a64, b64, exact):
    mag = _mm(a64.abs(), b64.abs())
    return ((out.cpu().double() - exact).abs() / mag).max().item()


def _bench_shape(shape, rounds, budget):
    a, b = _make(shape)
    a64, b64 = a.double(), b.double()
    exact = _mm(a64, b64)
    bt, m, k, n = shape
    flops = 2.0 * (bt or 1) * m * k * n
    runs = {v: _runner(v, a, b) for v in VARIANTS}
    errs, best = {}, {}
    for v in VARIANTS:  # the first call is timed too (it includes one-time costs)
        t0 = time.perf_counter()
        out = runs[v]()
        best[v] = time.perf_counter() - t0
        errs[v] = _error(out, a64, b64, exact)
    for _ in range(rounds):
        for v in VARIANTS:
            if best[v] * rounds > budget:  # PyTorch's CPU bf16 is very slow here: keep one call
                continue
            if v == VARIANTS[0]:
                settle()  # after the torch variants of the last round
            for _ in range(max(1, min(20, int(0.05 / best[v])))):  # ~50 ms of calls per round
                t0 = time.perf_counter()
                runs[v]()
                best[v] = min(best[v], time.perf_counter() - t0)
    return {v: flops / best[v] / 1e9 for v in VARIANTS}, errs


def _plot(path, names, table):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = [[table[nm][0][v] for v in VARIANTS] for nm in names]
    fig, ax = plt.subplots(figsize=(10, 4))
    w = 0.8 / len(VARIANTS)
    for i, v in enumerate(VARIANTS):
        ax.bar([x + i * w for x in range(len(names))], [g[i] for g in groups], w, label=v)
    ax.set_xticks([x + 0.4 for x in range(len(names))], names)
    ax.set_ylabel("GFLOP/s")
    ax.legend()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    print(f"plot: {path}")


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m torch_tpu.bench matmul")
    p.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    p.add_argument("--shapes", help="comma-separated subset of " + ", ".join(SHAPES))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", default="out/bench_matmul.png")
    args = p.parse_args(argv)
    names = args.shapes.split(",") if args.shapes else QUICK if args.quick else list(SHAPES)
    print(f"threads: torch {torch.get_num_threads()}, tpu host runtime "
          f"{os.environ.get('OMP_NUM_THREADS', os.cpu_count())} (OMP_NUM_THREADS or all cores); cpus {os.cpu_count()}")
    print("GFLOP/s (best of rounds) | rel. error vs float64 as log2 (max |C-C64| / (|A|@|B|))")
    head = f"{'shape':<12} {'B,M,K,N':<18}" + "".join(f"{v:>13}" for v in VARIANTS) + "  DEF/fp32 HIGH/DEF"
    print(head)
    table = {}
    for nm in progress.wrap(names, "matmul shapes"):
        gf, errs = _bench_shape(SHAPES[nm], args.rounds, budget=20.0)
        table[nm] = (gf, errs)
        bt, m, k, n = SHAPES[nm]
        dims = f"{bt or 1},{m},{k},{n}"
        ratio = gf["tpu DEFAULT"] / gf["torch fp32"]
        cost = gf["tpu DEFAULT"] / gf["tpu HIGH"]
        print(f"{nm:<12} {dims:<18}" + "".join(f"{gf[v]:>13.1f}" for v in VARIANTS) + f"  {ratio:>8.2f} {cost:>9.2f}")
        print(f"{'':<12} {'log2 err':<18}" + "".join(f"{math.log2(max(errs[v], 1e-300)):>13.1f}" for v in VARIANTS))
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        _plot(args.out, names, table)
    return [Row("matmul", f"{nm} f32 GFLOP/s, DEFAULT precision", table[nm][0]["tpu DEFAULT"], table[nm][0]["torch fp32"],
                unit="GFLOP/s", higher_is_better=True) for nm in names]
