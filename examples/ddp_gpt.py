"""Data-parallel training of the README's GPT (examples/gpt.py) on "tpu" with DDP over the
c10d backend tpu_dist:

    torchrun --nproc-per-node 2 examples/ddp_gpt.py [--steps 100]

In this repository's environment (Debian's PyTorch, built without libuv, which plain torchrun
needs; see docs/decisions/distributed.md) the same launcher is:

    tools/in-env python3 -m torch_tpu.distributed.run --nproc-per-node 2 \
        --master-addr 127.0.0.1 --master-port 29500 examples/ddp_gpt.py

Each rank draws the same global batch (same seed), trains on its slice of it, and DDP averages
the gradients, so every rank keeps identical weights (checked at the end) and the run equals
one process on the whole batch.
"""
import argparse
import datetime
import math
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import torch_tpu  # noqa: F401  (registers the "tpu" device and the tpu_dist backend)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt  # noqa: E402  (the README's model, optimizer and data)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch", type=int, default=8, help="global batch (split over the ranks)")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--ctx", type=int, default=128)
    ap.add_argument("--log-every", type=int, default=25)
    args = ap.parse_args(argv)

    dist.init_process_group("cpu:gloo,tpu:tpu_dist", timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch % world:
        raise SystemExit(f"[ddp_gpt] --batch {args.batch} is not a multiple of {world} ranks")

    torch.manual_seed(0)
    chars, data = gpt.load_data()
    cfg = gpt.Config(vocab=len(chars.chars), layers=args.layers, width=args.width, ctx=args.ctx)
    model = DDP(gpt.GPT(cfg).to("tpu"))
    opt = gpt.make_optimizer(model.module)
    sched = lambda s: min(1.0, (s + 1) / 20) * 0.5 * (1 + math.cos(math.pi * s / args.steps))  # noqa: E731
    gen = torch.Generator().manual_seed(1)
    if rank == 0:
        n = sum(p.numel() for p in model.parameters())
        print(f"ddp_gpt: {world} ranks, {cfg.layers} layers, width {cfg.width}, ctx {cfg.ctx}, "
              f"{n / 1e6:.2f} M params, global batch {args.batch}", flush=True)
    t0 = time.perf_counter()
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = 3e-3 * sched(step)
        x, y = gpt.get_batch(data, args.batch, cfg.ctx, gen)
        x, y = x.chunk(world)[rank], y.chunk(world)[rank]
        loss = gpt.train_step(model, opt, x.to("tpu"), y.to("tpu"))
        if step % args.log_every == 0 or step == args.steps - 1:
            mean = loss.detach().clone()
            dist.all_reduce(mean, op=dist.ReduceOp.AVG)
            if rank == 0:
                print(f"step {step:4d}  loss {mean.item():.4f}  {time.perf_counter() - t0:6.1f} s", flush=True)

    # every rank must hold the same weights
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    lo, hi = flat.clone(), flat.clone()
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    if not torch.equal(lo.cpu(), hi.cpu()):
        raise SystemExit("[ddp_gpt] ranks diverged")
    if rank == 0:
        print(f"trained {args.steps} steps on {world} ranks in {time.perf_counter() - t0:.1f} s; weights identical")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
