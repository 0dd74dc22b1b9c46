"""python -m torch_tpu.bench resnet [--batch B] [--image S] [--steps N] [--rounds R]

Train-step time of ResNet-18 (plain torch.nn, torch_tpu/bench/_resnet.py; batch norm in
training mode; cross-entropy; SGD with momentum) on tpu in strict and fused eager at DEFAULT
precision, next to PyTorch CPU eager fp32, from the same weights and batch in one run. Rounds
alternate the sides; the best round counts. A tpu step ends with a sync (the loss's .item()).
"""
import argparse
import contextlib
import copy
import time

import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu._internal import progress
from torch_tpu.bench import settle
from torch_tpu.bench._report import Row
from torch_tpu.bench._resnet import resnet18

_SIDES = {"tpu strict": ("tpu", torch_tpu.EagerMode.DEFER_NEVER), "tpu fused": ("tpu", torch_tpu.EagerMode.DEFER_AND_FUSE),
          "cpu": ("cpu", None)}


class _Side:
    def __init__(self, net, dev, mode, x, y):
        self.mode = mode
        self.model = copy.deepcopy(net).to(dev).train()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)
        self.x, self.y = x.to(dev), y.to(dev)
        self.loss = None

    def timed(self, n):
        ctx = torch_tpu.eager_mode(self.mode) if self.mode is not None else contextlib.nullcontext()
        t0 = time.perf_counter()
        with ctx:
            for _ in range(n):
                loss = F.cross_entropy(self.model(self.x), self.y)
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                self.opt.step()
            self.loss = loss.item()
        return (time.perf_counter() - t0) / n


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m torch_tpu.bench resnet")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--image", type=int, default=64)
    ap.add_argument("--steps", type=int, default=3, help="timed steps per round and side")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    net = resnet18(num_classes=100)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(args.batch, 3, args.image, args.image, generator=g)
    y = torch.randint(0, 100, (args.batch,), generator=g)
    prev = torch_tpu.get_matmul_precision()
    torch_tpu.set_matmul_precision("default")
    try:
        sides = {k: _Side(net, dev, mode, x, y) for k, (dev, mode) in _SIDES.items()}
        for s in sides.values():
            s.timed(1)  # warm-up: compiles
        best = {k: float("inf") for k in sides}
        for _ in progress.wrap(range(args.rounds), "resnet rounds"):
            for k, s in sides.items():
                settle()
                best[k] = min(best[k], s.timed(args.steps))
    finally:
        torch_tpu.set_matmul_precision(prev)
    print(f"ResNet-18 train step (batch {args.batch}, 3x{args.image}x{args.image}, SGD momentum), best of "
          f"{args.rounds} rounds x {args.steps} steps; tpu at DEFAULT precision, CPU fp32; torch {torch.get_num_threads()} threads")
    print(f"{'side':<12} {'ms/step':>9} {'vs CPU':>7} {'last loss':>10}")
    for k, s in sides.items():
        print(f"{k:<12} {best[k] * 1e3:9.1f} {best['cpu'] / best[k]:6.2f}x {s.loss:10.4f}")
    what = f"ResNet-18 train step (batch {args.batch}, {args.image}x{args.image})"
    return [Row("resnet", f"{what}, {k.split()[1]} eager", best[k] * 1e3, best["cpu"] * 1e3, goal=1.0)
            for k in ("tpu strict", "tpu fused")]
