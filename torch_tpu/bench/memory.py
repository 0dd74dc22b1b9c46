"""python -m torch_tpu.bench memory [--steps N] [--batch B]

Reserved device memory over a long training loop without sync points: the README's GPT
(examples/gpt.py, AdamW foreach + clip_grad_norm_) trained for `--steps` steps in strict
eager, fused eager and torch.compile(backend="tpu"), each from the same weights, with no
.item() or synchronize inside the loop (the host runs ahead of the device stream, as in a real
training loop). Prints torch.tpu.memory_reserved() at step 10 and at the last step, read
without syncing, and the ratio. The caching allocator reuses memory in stream order
(csrc/device/allocator.cpp), so the ratio stays near 1 however far ahead the host runs.
"""
import argparse
import copy

import torch

import torch_tpu
from torch_tpu._internal import progress
from torch_tpu.bench._report import Row
from torch_tpu.bench.gpt import setup


def _run(gpt, model, batches, mode, steps):
    torch.tpu.synchronize()
    torch.tpu.empty_cache()
    torch.tpu.reset_peak_memory_stats()
    m = copy.deepcopy(model).to("tpu")
    opt = gpt.make_optimizer(m)
    fwd = torch.compile(m, backend="tpu") if mode == "compiled" else m
    data = [(x.to("tpu"), y.to("tpu")) for x, y in batches]
    eager = torch_tpu.EagerMode.DEFER_AND_FUSE if mode == "fused" else torch_tpu.EagerMode.DEFER_NEVER
    at = {}
    with torch_tpu.eager_mode(eager):
        for i in progress.wrap(range(1, steps + 1), f"memory {mode}"):
            x, y = data[i % len(data)]
            _, loss = fwd(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0, foreach=True)
            opt.step()
            if i in (10, steps):
                at[i] = torch.tpu.memory_reserved()
        final_loss = loss.item()  # the one sync point
    return at[10], at[steps], torch.tpu.max_memory_allocated(), final_loss


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m torch_tpu.bench memory")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--modes", default="strict,fused,compiled")
    args = ap.parse_args(argv)
    assert args.steps >= 10, "--steps must be at least 10"
    gpt, cfg, model, batches = setup(args.batch, 4)
    mib = 1 << 20
    print(f"GPT ({cfg.layers} layers, width {cfg.width}, ctx {cfg.ctx}, batch {args.batch}), {args.steps} steps, "
          "no sync inside the loop")
    print(f"{'mode':<10} {'reserved@10':>12} {'reserved@' + str(args.steps):>13} {'ratio':>7} {'peak alloc':>11} {'loss':>8}")
    worst = 0.0
    for mode in args.modes.split(","):
        r10, rend, peak, loss = _run(gpt, model, batches, mode, args.steps)
        ratio = rend / max(r10, 1)
        worst = max(worst, ratio)
        print(f"{mode:<10} {r10 / mib:10.1f}Mi {rend / mib:11.1f}Mi {ratio:6.2f}x {peak / mib:9.1f}Mi {loss:8.4f}")
    print(f"worst ratio reserved@{args.steps} / reserved@10: {worst:.2f}x (goal <= 1.10x)")
    return [Row("memory", f"GPT reserved memory, step {args.steps} / step 10 (worst mode)", worst, unit="x", goal=1.10)]
