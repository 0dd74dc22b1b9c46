"""python -m torch_tpu.bench gpt [--steps N] [--warmup N] [--batch B] [--rounds R]

Train-step time of the demo GPT (examples/gpt.py: 4 layers, 4 heads, width 128, context
128, AdamW foreach + clip_grad_norm_) on tpu in strict eager mode (DEFER_NEVER) at DEFAULT
matmul precision, next to PyTorch CPU eager fp32, measured in the same run from the same
initial weights and batches. Rounds alternate the two sides (each round times `--steps`
steps of each after warm-up; the best round counts, which discounts other processes on a
shared machine). A tpu step ends with a stream sync so queued work is counted.

Threads: both sides use their defaults (printed); for a same-thread comparison run with
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1.
"""
import argparse
import copy
import importlib.util
import os
import pathlib
import time

import torch

import torch_tpu
from torch_tpu._internal import progress
from torch_tpu.bench import settle
from torch_tpu.bench._report import Row

_EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "gpt.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("torch_tpu_gpt_example", _EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def setup(batch, n_batches):
    """The example module, its default config, a model seeded with 0 and `n_batches` batches."""
    gpt = _load_example()
    torch.manual_seed(0)
    chars, data = gpt.load_data()
    cfg = gpt.Config(vocab=len(chars.chars))
    model = gpt.GPT(cfg)
    gen = torch.Generator().manual_seed(1)
    return gpt, cfg, model, [gpt.get_batch(data, batch, cfg.ctx, gen) for _ in range(n_batches)]


class _Side:
    def __init__(self, gpt, model, device, batches):
        self.device = device
        self.model = copy.deepcopy(model).to(device)
        self.opt = gpt.make_optimizer(self.model)
        self.batches = [(x.to(device), y.to(device)) for x, y in batches]
        self.step_fn = gpt.train_step
        self.i = 0
        self.last_loss = None

    def steps(self, n):
        for _ in range(n):
            x, y = self.batches[self.i % len(self.batches)]
            self.i += 1
            self.last_loss = self.step_fn(self.model, self.opt, x, y)
        if self.device != "cpu":
            torch.tpu.synchronize()

    def timed(self, n):
        t0 = time.perf_counter()
        self.steps(n)
        return (time.perf_counter() - t0) / n


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m torch_tpu.bench gpt")
    ap.add_argument("--steps", type=int, default=5, help="timed steps per round and side")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    args = ap.parse_args(argv)

    gpt, cfg, model, batches = setup(args.batch, 8)

    prev_mode = torch_tpu.get_eager_mode()
    torch_tpu.set_eager_mode(torch_tpu.EagerMode.DEFER_NEVER)
    prev_prec = torch_tpu.get_matmul_precision()
    torch_tpu.set_matmul_precision("default")
    try:
        sides = {"tpu": _Side(gpt, model, "tpu", batches), "cpu": _Side(gpt, model, "cpu", batches)}
        for s in sides.values():
            s.steps(args.warmup)
        best = {k: float("inf") for k in sides}
        for _ in progress.wrap(range(args.rounds), "gpt rounds"):
            for k, s in sides.items():
                settle()
                best[k] = min(best[k], s.timed(args.steps))
    finally:
        torch_tpu.set_matmul_precision(prev_prec)
        torch_tpu.set_eager_mode(prev_mode)

    tokens = args.batch * cfg.ctx
    n_params = sum(p.numel() for p in model.parameters())
    print(f"GPT train step: {cfg.layers} layers, {cfg.heads} heads, width {cfg.width}, ctx {cfg.ctx}, "
          f"batch {args.batch}, {n_params / 1e6:.2f} M params; AdamW(foreach) + clip_grad_norm_")
    print(f"threads: torch {torch.get_num_threads()}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; "
          f"best of {args.rounds} rounds x {args.steps} steps after {args.warmup} warm-up")
    print(f"{'side':<34} {'ms/step':>10} {'tokens/s':>10} {'last loss':>10}")
    for k, label in (("tpu", "tpu strict eager, DEFAULT precision"), ("cpu", "PyTorch CPU eager fp32")):
        s = sides[k]
        print(f"{label:<34} {best[k] * 1e3:10.1f} {tokens / best[k]:10.0f} {s.last_loss.item():10.4f}")
    ratio = best["tpu"] / best["cpu"]
    print(f"ratio tpu/cpu step time: {ratio:.2f}x ({'tpu slower' if ratio > 1 else 'tpu faster'})")
    return [Row("gpt", f"GPT train step (batch {args.batch}), strict eager", best["tpu"] * 1e3, best["cpu"] * 1e3, goal=1.0)]
