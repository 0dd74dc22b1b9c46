"""Strict vs fused eager on a transformer block (forward+backward) and memory-bound chains:
`python -m torch_tpu.bench fused [--iters N]`. Prints both times, the ratio, the compile
cache hit rate of a training loop after warm-up, and PyTorch CPU eager on the same case (same
seed) next to the fused time."""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu
from torch_tpu import EagerMode
from torch_tpu.bench import settle
from torch_tpu.bench._report import Row


class Block(nn.Module):
    def __init__(self, d=128, heads=4, ctx=128):
        super().__init__()
        self.h = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        mask = torch.full((ctx, ctx), float("-inf")).triu(1)
        self.register_buffer("mask", mask)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.reshape(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (d // self.h) ** 0.5) + self.mask[:t, :t]
        y = att.softmax(-1) @ v
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def _time(step, iters, sync=torch.tpu.synchronize, rounds=3):
    """Best of `rounds` rounds of `iters` steps, ms per step (one round swung +-50% on the
    shared 2-core VM)."""
    for _ in range(3):
        step()
    sync()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        sync()
        best = min(best, (time.perf_counter() - t0) / iters * 1e3)
    return best


def _both(step, iters):
    strict = _time(step, iters)
    with torch_tpu.eager_mode(EagerMode.DEFER_AND_FUSE):
        for _ in range(2):  # warm-up: the hit rate is that of the steady loop
            step()
        s0 = torch.tpu._get_cache_stats()
        fused = _time(step, iters)
        s1 = torch.tpu._get_cache_stats()
    reqs = s1["num_cache_reqs"] - s0["num_cache_reqs"]
    hits = s1["num_cache_hits"] - s0["num_cache_hits"]
    return strict, fused, (hits / reqs if reqs else 1.0)


def _cases(dev):
    """The cases on `dev`, from the same seed on every device."""
    torch.manual_seed(0)
    block = Block().to(dev)
    x = torch.randn(8, 128, 128).to(dev)

    def block_step():
        block.zero_grad(set_to_none=True)
        block(x).square().mean().backward()
        block.fc1.weight.grad.sum().item()  # a sync point per step, as a training loop has

    h = torch.randn(1024, 512).to(dev)
    w1, w2 = (torch.randn(512, 512) * 0.02).to(dev), (torch.randn(512, 512) * 0.02).to(dev)
    ln = nn.LayerNorm(512).to(dev)

    return {
        "transformer block fwd+bwd (b8 t128 d128)": block_step,
        "GELU MLP chain [1024x512]": lambda: (F.gelu(h @ w1) @ w2).add(h).sum().item(),
        "LayerNorm [1024x512]": lambda: ln(h * 2 + 1).sum().item(),
        "softmax chain [1024x512]": lambda: (h * 0.5).softmax(-1).mul(h).sum().item(),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m torch_tpu.bench fused")
    ap.add_argument("--iters", type=int, default=10)
    args = ap.parse_args(argv)
    cases, cpu_cases = _cases("tpu"), _cases("cpu")
    print(f"{'case':<44} {'strict ms':>10} {'fused ms':>10} {'speedup':>8} {'cache hit':>10} {'cpu ms':>8} {'cpu/fused':>9}")
    rows = []
    for name, fn in cases.items():
        settle()  # the previous case's CPU run leaves OpenBLAS workers spinning
        s, f, hit = _both(fn, args.iters)
        c = _time(cpu_cases[name], args.iters, sync=lambda: None)
        print(f"{name:<44} {s:10.2f} {f:10.2f} {s / f:8.2f} {hit:10.0%} {c:8.2f} {c / f:9.2f}")
        rows.append(Row("fused", f"{name}, fused eager", f, c, note=f"strict eager {s:.2f} ms"))
    return rows
