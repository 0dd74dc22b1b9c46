"""python -m torch_tpu.bench decomps [--batch B] [--image S]

Python decomposition calls (torch_tpu/_internal/decompositions.py: ops without a C++ lowering,
run as sequences of lowered ops; slower to dispatch) in one training step, after a warm-up
step, of:
  * ResNet-18 (plain torch.nn, torch_tpu/bench/_resnet.py; batch norm in training mode),
    cross-entropy, SGD with momentum;
  * the README GPT (examples/gpt.py), AdamW foreach + clip_grad_norm_;
each in strict eager (DEFER_NEVER) and fused eager (DEFER_AND_FUSE). Goal: 0 (issue 17: no
hidden slow paths on a training hot path). Prints the ops decomposed and their calls.
"""
import argparse
import copy

import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu._internal import decompositions
from torch_tpu.bench._report import Row

_MODES = {"strict": torch_tpu.EagerMode.DEFER_NEVER, "fused": torch_tpu.EagerMode.DEFER_AND_FUSE}


def _resnet_step(batch, image):
    from torch_tpu.bench._resnet import resnet18

    torch.manual_seed(0)
    model = resnet18(num_classes=100).to("tpu").train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, 3, image, image, generator=g).to("tpu")
    y = torch.randint(0, 100, (batch,), generator=g).to("tpu")

    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    return step


def _gpt_step(batch):
    from torch_tpu.bench.gpt import setup

    gpt, _, model, batches = setup(batch, 1)
    m = copy.deepcopy(model).to("tpu")
    opt = gpt.make_optimizer(m)
    x, y = (t.to("tpu") for t in batches[0])
    return lambda: gpt.train_step(m, opt, x, y)


def count_step(make_step, mode):
    """{aten op: decomposition calls} of the second step of `make_step()` in eager `mode`."""
    with torch_tpu.eager_mode(_MODES[mode]):
        step = make_step()
        step().item()
        before = decompositions.counts()
        step().item()
    after = decompositions.counts()
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m torch_tpu.bench decomps")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--image", type=int, default=64, help="ResNet-18 input height and width")
    args = ap.parse_args(argv)
    models = {"ResNet-18": lambda: _resnet_step(args.batch, args.image), "GPT": lambda: _gpt_step(args.batch)}
    rows = []
    print(f"Python decomposition calls per training step (after one warm-up step; batch {args.batch}, "
          f"ResNet-18 at {args.image}x{args.image}); goal 0")
    print(f"{'model':<10} {'mode':<7} {'calls':>6}  ops")
    for name, make in models.items():
        for mode in _MODES:
            counts = count_step(make, mode)
            total = sum(counts.values())
            ops = ", ".join(f"{k.replace('aten::', '')} x{v}" for k, v in sorted(counts.items())) or "-"
            print(f"{name:<10} {mode:<7} {total:>6}  {ops}")
            rows.append(Row("decomps", f"{name} train step, {mode}: decomposition calls", total, unit="calls",
                            goal=0, note=ops if counts else ""))
    return rows
