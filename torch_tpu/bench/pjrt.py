"""python -m torch_tpu.bench pjrt [--steps N] [--iters N]

The pjrt runtime (XLA through a PJRT plugin; TORCH_TPU_PJRT_PLUGIN or the installed XLA CPU
plugin) next to the host runtime and PyTorch CPU, measured in one run. The runtime is chosen
once per process, so each runtime runs in a child process with the same seeds; the parent
measures PyTorch CPU and prints the table.
  * per-op eager latency (strict mode, small tensors, after warm-up): N ops then one sync
  * compile time: the first call of an op at a new shape (compile + run) minus a warm call
  * the README GPT's train step under torch.compile(backend="tpu"), DEFAULT precision, after
    warm-up; its cold first step (capture + compile of every graph)
"""
import argparse
import json
import os
import subprocess
import sys
import time

import torch

import torch_tpu
from torch_tpu.bench._report import Row
from torch_tpu.bench.dispatch import CASES, _time


def _child(runtime, steps, iters):
    torch_tpu.set_runtime(runtime)
    torch.manual_seed(0)
    a, b = torch.randn(16, 16).to("tpu"), torch.randn(16, 16).to("tpu")
    out = {"ops": {}}
    for name, fn in CASES.items():
        out["ops"][name] = _time(fn, a, b, iters, torch.tpu.synchronize)
    # Compile time of one op at fresh shapes (a new graph each), minus the warm call.
    firsts = []
    for n in range(17, 22):
        x = torch.randn(n, n + 1, device="tpu")
        torch.tpu.synchronize()
        t0 = time.perf_counter()
        (x * 3.0 + 1.0).cpu()
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        (x * 3.0 + 1.0).cpu()
        firsts.append(first - (time.perf_counter() - t0))
    out["compile_op_ms"] = 1e3 * sorted(firsts)[len(firsts) // 2]
    from torch_tpu.bench.compile import _GptSide, _gpt_setup
    gpt, cfg, model, batches = _gpt_setup(8)
    prev = torch_tpu.get_matmul_precision()
    torch_tpu.set_matmul_precision("default")
    try:
        side = _GptSide(gpt, model, "tpu", batches, compile_backend="tpu")
        t0 = time.perf_counter()
        side.steps(1)
        out["gpt_cold_s"] = time.perf_counter() - t0
        side.steps(2)
        out["gpt_step_ms"] = 1e3 * min(side.timed(steps) for _ in range(2))
        out["gpt_loss"] = float(side.last_loss)
    finally:
        torch_tpu.set_matmul_precision(prev)
    print("JSON" + json.dumps(out))


def _spawn(runtime, steps, iters):
    r = subprocess.run([sys.executable, "-m", "torch_tpu.bench", "pjrt", "--child", runtime, "--steps", str(steps),
                        "--iters", str(iters)], capture_output=True, text=True, env=dict(os.environ))
    for line in r.stdout.splitlines():
        if line.startswith("JSON"):
            return json.loads(line[4:])
    raise RuntimeError(f"[bench pjrt] the {runtime} child failed (rc {r.returncode}):\n{r.stderr[-3000:]}")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m torch_tpu.bench pjrt")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--child", default=None)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.child, args.steps, args.iters)
        return 0
    res = {rt: _spawn(rt, args.steps, args.iters) for rt in ("host", "pjrt")}
    torch.manual_seed(0)
    a, b = torch.randn(16, 16), torch.randn(16, 16)
    cpu_ops = {name: _time(fn, a, b, args.iters, lambda: None) for name, fn in CASES.items()}
    from torch_tpu.bench.compile import _GptSide, _gpt_setup
    gpt, cfg, model, batches = _gpt_setup(8)
    side = _GptSide(gpt, model, "cpu", batches)
    side.steps(2)
    cpu_step = 1e3 * min(side.timed(args.steps) for _ in range(2))

    print(f"pjrt plugin: {os.environ.get('TORCH_TPU_PJRT_PLUGIN') or 'installed XLA CPU plugin'}; "
          f"torch {torch.get_num_threads()} threads")
    print("per-op strict eager (us/op, 16x16, after warm-up):")
    print(f"  {'op':<16} {'cpu':>8} {'host':>8} {'pjrt':>8} {'pjrt/host':>10}")
    worst = 0.0
    for name in CASES:
        h, p = res["host"]["ops"][name], res["pjrt"]["ops"][name]
        worst = max(worst, p / h)
        print(f"  {name:<16} {cpu_ops[name]:8.2f} {h:8.2f} {p:8.2f} {p / h:9.2f}x")
    print(f"  worst pjrt/host per op: {worst:.2f}x (goal <= 3x)")
    print(f"compile time of one small op graph: host {res['host']['compile_op_ms']:.2f} ms, "
          f"pjrt {res['pjrt']['compile_op_ms']:.2f} ms")
    print("GPT train step, torch.compile(backend='tpu'), DEFAULT precision (ms/step):")
    h, p = res["host"]["gpt_step_ms"], res["pjrt"]["gpt_step_ms"]
    print(f"  host {h:.1f}, pjrt {p:.1f}, PyTorch CPU eager {cpu_step:.1f}; pjrt/host {p / h:.2f}x (goal <= 1.0x), "
          f"pjrt/CPU eager {p / cpu_step:.2f}x")
    print(f"  cold first step (capture + compile): host {res['host']['gpt_cold_s']:.2f} s, pjrt {res['pjrt']['gpt_cold_s']:.2f} s")
    print(f"  last loss: host {res['host']['gpt_loss']:.4f}, pjrt {res['pjrt']['gpt_loss']:.4f}")
    return [Row("pjrt", "GPT train step, torch.compile on the pjrt runtime vs CPU eager", p, cpu_step)]
