"""python -m torch_tpu.bench compile [--steps N] [--rounds R] [--no-cold] [--no-resnet]

torch.compile(backend="tpu") next to the alternatives, in one run from the same weights and
batches:
  * GPT train step (examples/gpt.py: 4 layers, width 128, context 128, batch 8; AdamW foreach
    + clip_grad_norm_, the optimizer eager): tpu compiled, tpu fused eager, PyTorch CPU with
    torch.compile (Inductor), PyTorch CPU eager. tpu runs at DEFAULT matmul precision (TPU
    numerics: bf16 products, f32 accumulation), CPU in fp32.
  * ResNet-18 inference (torchvision, batch 8, 3x112x112, eval mode, no_grad): the same sides.
  * Cold first-call time of the compiled GPT train step (Dynamo + AOTAutograd + compile + first
    run), ours vs Inductor's, each in a fresh process with empty caches (Inductor's FX graph
    and kernel caches pointed at a new directory), then in a second fresh process that finds
    the first one's on-disk caches (ours: AOTAutograd results in TORCH_TPU_CACHE_DIR).
Rounds alternate the sides; the best round counts (discounts other processes on a shared
machine). tpu steps end with a stream sync.
"""
import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

import torch_tpu
from torch_tpu._internal import progress
from torch_tpu.bench import settle
from torch_tpu.bench._report import Row
from torch_tpu.bench.gpt import setup as _gpt_setup_n


def _gpt_setup(batch):
    return _gpt_setup_n(batch, 4)


def _sync(dev):
    if dev == "tpu":
        torch.tpu.synchronize()


class _GptSide:
    def __init__(self, gpt, model, dev, batches, compile_backend=None, fused=False):
        self.dev, self.fused = dev, fused
        self.model = copy.deepcopy(model).to(dev)
        self.fwd = torch.compile(self.model, backend=compile_backend) if compile_backend else self.model
        self.opt = gpt.make_optimizer(self.model)
        self.batches = [(x.to(dev), y.to(dev)) for x, y in batches]
        self.gpt, self.i, self.last_loss = gpt, 0, None

    def steps(self, n):
        mode = torch_tpu.eager_mode(torch_tpu.EagerMode.DEFER_AND_FUSE) if self.fused else _Null()
        with mode:
            for _ in range(n):
                x, y = self.batches[self.i % len(self.batches)]
                self.i += 1
                _, loss = self.fwd(x, y)
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0, foreach=True)
                self.opt.step()
                self.last_loss = loss
            _sync(self.dev)

    def timed(self, n):
        t0 = time.perf_counter()
        self.steps(n)
        return (time.perf_counter() - t0) / n


class _ResnetSide:
    def __init__(self, model, dev, x, compile_backend=None, fused=False):
        self.dev, self.fused = dev, fused
        self.model = copy.deepcopy(model).to(dev).eval()
        self.fwd = torch.compile(self.model, backend=compile_backend) if compile_backend else self.model
        # Distinct batches: the fused mode's window hash-conses equal nodes, so the same batch
        # n times in one window would be partly computed once (the stem convolution was).
        self.xs = [(x * (1 + 0.01 * i)).to(dev) for i in range(4)]
        self.last = None

    def steps(self, n):
        mode = torch_tpu.eager_mode(torch_tpu.EagerMode.DEFER_AND_FUSE) if self.fused else _Null()
        with mode, torch.no_grad():
            # every output kept: fused mode skips dead ones
            outs = [self.fwd(self.xs[i % len(self.xs)]) for i in range(n)]
            _sync(self.dev)
        self.last = outs[-1]

    def timed(self, n):
        t0 = time.perf_counter()
        self.steps(n)
        return (time.perf_counter() - t0) / n


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


_SIDES = [("tpu_compiled", "tpu torch.compile(backend='tpu')"), ("tpu_fused", "tpu fused eager (DEFER_AND_FUSE)"),
          ("cpu_inductor", "CPU torch.compile (Inductor)"), ("cpu_eager", "CPU eager fp32")]


def _make(kind, make_side):
    return {
        "tpu_compiled": lambda: make_side("tpu", "tpu", False),
        "tpu_fused": lambda: make_side("tpu", None, True),
        "cpu_inductor": lambda: make_side("cpu", "inductor", False),
        "cpu_eager": lambda: make_side("cpu", None, False),
    }[kind]()


def _race(sides, warmup, steps, rounds):
    for s in sides.values():
        s.steps(warmup)
    best = {k: float("inf") for k in sides}
    for _ in progress.wrap(range(rounds), "rounds"):
        for k, s in sides.items():
            settle()
            best[k] = min(best[k], s.timed(steps))
    return best


def _table(title, best, extra):
    fastest_cpu = min(best["cpu_eager"], best["cpu_inductor"])
    print(title)
    print(f"  {'side':<36} {'ms':>9} {'vs faster CPU':>14} {extra[0]:>10}")
    for k, label in _SIDES:
        print(f"  {label:<36} {best[k] * 1e3:9.1f} {best[k] / fastest_cpu:13.2f}x {extra[1](k):>10}")


def _cold(kind, batch):
    """Runs in a fresh process: the first compiled GPT train step, timed."""
    gpt, cfg, model, batches = _gpt_setup(batch)
    dev, backend = ("tpu", "tpu") if kind == "tpu" else ("cpu", kind)
    torch_tpu.set_matmul_precision("default")
    t0 = time.perf_counter()
    side = _GptSide(gpt, model, dev, batches[:1], compile_backend=backend)
    side.steps(1)
    first = time.perf_counter() - t0
    t1 = time.perf_counter()
    side.steps(1)
    second = time.perf_counter() - t1
    print(json.dumps({"first": first, "second": second}))


def _cold_in_subprocess(kind, batch):
    """The first compiled step in a fresh process with empty caches, then in a second fresh
    process that finds the first one's on-disk caches (ours: TORCH_TPU_CACHE_DIR; Inductor's:
    its FX graph and AOTAutograd caches)."""
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench_compile_") as d:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(d, "inductor"), TRITON_CACHE_DIR=os.path.join(d, "triton"),
                   TORCH_TPU_CACHE_DIR=os.path.join(d, "tpu"))
        for _ in range(2):
            out = subprocess.run([sys.executable, "-m", "torch_tpu.bench", "compile", "--cold-child", kind, "--batch", str(batch)],
                                 env=env, capture_output=True, text=True, check=False)
            if out.returncode != 0:
                raise RuntimeError(f"cold {kind} run failed:\n{out.stderr[-3000:]}")
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return runs


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m torch_tpu.bench compile")
    ap.add_argument("--steps", type=int, default=5, help="timed steps per round and side")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--no-cold", action="store_true", help="skip the cold first-call measurement")
    ap.add_argument("--no-resnet", action="store_true")
    ap.add_argument("--cold-child", choices=["tpu", "inductor", "aot_eager"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.cold_child:
        _cold(args.cold_child, args.batch)
        return 0

    prev_prec = torch_tpu.get_matmul_precision()
    torch_tpu.set_matmul_precision("default")
    rows = []
    try:
        print(f"threads: torch {torch.get_num_threads()}, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}; best of {args.rounds} rounds x {args.steps} steps "
              f"after {args.warmup} warm-up; tpu at DEFAULT precision, CPU fp32")
        gpt, cfg, model, batches = _gpt_setup(args.batch)
        sides = {k: _make(k, lambda dev, be, fu: _GptSide(gpt, model, dev, batches, be, fu)) for k, _ in _SIDES}
        best = _race(sides, args.warmup, args.steps, args.rounds)
        rows += _rows(f"GPT train step (batch {args.batch})", best, gpt=True)
        _table(f"GPT train step ({cfg.layers} layers, width {cfg.width}, ctx {cfg.ctx}, batch {args.batch}):", best,
               ("last loss", lambda k: f"{sides[k].last_loss.item():.4f}"))
        if not args.no_resnet:
            from torchvision.models import resnet18

            torch.manual_seed(0)
            net = resnet18(num_classes=100)
            x = torch.randn(8, 3, 112, 112)
            rs = {k: _make(k, lambda dev, be, fu: _ResnetSide(net, dev, x, be, fu)) for k, _ in _SIDES}
            best_r = _race(rs, 1, max(2, args.steps // 2), args.rounds)
            rows += _rows("ResNet-18 inference (batch 8)", best_r)
            ref = rs["cpu_eager"].last.float()
            _table("ResNet-18 inference (batch 8, 3x112x112):", best_r,
                   ("max |diff|", lambda k: f"{(rs[k].last.cpu().float() - ref).abs().max().item():.2e}"))
        if not args.no_cold:
            ours, ours_warm = _cold_in_subprocess("tpu", args.batch)
            theirs, theirs_warm = _cold_in_subprocess("inductor", args.batch)
            floor, _ = _cold_in_subprocess("aot_eager", args.batch)
            print("Cold first call of the compiled GPT train step (fresh process, empty caches):")
            print(f"  tpu backend: {ours['first']:.2f} s (next step {ours['second'] * 1e3:.0f} ms)")
            print(f"  Inductor CPU: {theirs['first']:.2f} s (next step {theirs['second'] * 1e3:.0f} ms)")
            print(f"  ratio ours/Inductor: {ours['first'] / theirs['first']:.2f}x")
            # What every backend pays before its own compiler runs: importing torch._dynamo,
            # Dynamo's trace, AOTAutograd's joint trace (aot_eager: those, then plain eager).
            print(f"  PyTorch's frontend alone (aot_eager on CPU): {floor['first']:.2f} s = "
                  f"{floor['first'] / theirs['first']:.2f}x Inductor; ours above it: {ours['first'] - floor['first']:.2f} s")
            rows.append(Row("compile", "GPT cold first compiled step vs Inductor", ours["first"], theirs["first"], unit="s",
                            goal=10.0, note=f"issue 17: <= 0.1x Inductor's; PyTorch's frontend alone (aot_eager) "
                                            f"{floor['first']:.2f} s"))
            print("First call in a second fresh process, on-disk caches warm:")
            print(f"  tpu backend: {ours_warm['first']:.2f} s; Inductor CPU: {theirs_warm['first']:.2f} s; "
                  f"ratio {ours_warm['first'] / theirs_warm['first']:.2f}x")
    finally:
        torch_tpu.set_matmul_precision(prev_prec)
    return rows


def _rows(what, best, gpt=False):
    """Our compiled step vs the faster of Inductor and CPU eager, our fused eager step vs CPU
    eager. The GPT rows carry issue 17's goals (compiled <= 0.6x the faster CPU side, fused
    <= 0.8x CPU eager); the others ask only to be faster."""
    faster = min(best["cpu_inductor"], best["cpu_eager"])
    return [Row("compile", f"{what}, torch.compile vs faster of Inductor and CPU eager", best["tpu_compiled"] * 1e3,
                faster * 1e3, goal=1 / 0.6 if gpt else 1.0),
            Row("compile", f"{what}, fused eager vs CPU eager", best["tpu_fused"] * 1e3, best["cpu_eager"] * 1e3,
                goal=1 / 0.8 if gpt else 1.0)]
