"""Results live on their inputs' device (factories: on the current device), as on CUDA, for
every op family and eager mode, on a non-zero device; the queue of a device is bounded
(backpressure). Runs in a subprocess with TORCH_TPU_NUM_DEVICES=2 (read once, at import)."""
import os
import subprocess
import sys

import pytest
import torch

import torch_tpu
from torch_tpu import _C

_CHILD = r"""
import torch, torch_tpu
import torch.nn.functional as F
torch.manual_seed(0)
HIGHEST = torch_tpu.Precision.HIGHEST
MODE = {"strict": torch_tpu.EagerMode.DEFER_NEVER, "fused": torch_tpu.EagerMode.DEFER_AND_FUSE,
        "debug": torch_tpu.EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING}["MODE_NAME"]
D = torch.device("tpu:1")
a, b = torch.randn(4, 6), torch.randn(4, 6)
m, v = torch.randn(6, 5), torch.randn(4, 6).abs() + 0.1
ids = torch.tensor([0, 3, 1])
img = torch.randn(2, 3, 8, 8)
w = torch.randn(4, 3, 3, 3)
spd = a @ a.T + 6 * torch.eye(4)
CASES = {
    "add": lambda a, b, m, v, ids, img, w, spd: a + b,
    "mul_scalar": lambda a, b, m, v, ids, img, w, spd: a * 2,
    "inplace": lambda a, b, m, v, ids, img, w, spd: a.clone().add_(b, alpha=0.5),
    "unary": lambda a, b, m, v, ids, img, w, spd: torch.tanh(a).exp(),
    "compare": lambda a, b, m, v, ids, img, w, spd: a > b,
    "where": lambda a, b, m, v, ids, img, w, spd: torch.where(a > 0, a, b),
    "reduce": lambda a, b, m, v, ids, img, w, spd: a.sum(1),
    "argmax": lambda a, b, m, v, ids, img, w, spd: a.argmax(),
    "softmax": lambda a, b, m, v, ids, img, w, spd: F.softmax(a, -1),
    "matmul": lambda a, b, m, v, ids, img, w, spd: a @ m,
    "conv": lambda a, b, m, v, ids, img, w, spd: F.conv2d(img, w, padding=1),
    "pool": lambda a, b, m, v, ids, img, w, spd: F.max_pool2d(img, 2),
    "layer_norm": lambda a, b, m, v, ids, img, w, spd: F.layer_norm(a, (6,)),
    "index_select": lambda a, b, m, v, ids, img, w, spd: a.index_select(0, ids),
    "gather": lambda a, b, m, v, ids, img, w, spd: a[ids],
    "embedding": lambda a, b, m, v, ids, img, w, spd: F.embedding(ids, m),
    "cat": lambda a, b, m, v, ids, img, w, spd: torch.cat([a, b]),
    "view_copy": lambda a, b, m, v, ids, img, w, spd: a.t().contiguous(),
    "sort": lambda a, b, m, v, ids, img, w, spd: a.sort(-1).values,
    "cumsum": lambda a, b, m, v, ids, img, w, spd: a.cumsum(0),
    "cross_entropy": lambda a, b, m, v, ids, img, w, spd: F.cross_entropy(a[:3], ids),
    "cholesky": lambda a, b, m, v, ids, img, w, spd: torch.linalg.cholesky(spd),
    "addcdiv": lambda a, b, m, v, ids, img, w, spd: torch.addcdiv(a, b, v, value=-0.3),
    "zeros_like": lambda a, b, m, v, ids, img, w, spd: torch.zeros_like(a),
    "full": lambda a, b, m, v, ids, img, w, spd: torch.full((2, 3), 1.5, device=a.device),
    "arange": lambda a, b, m, v, ids, img, w, spd: torch.arange(5, device=a.device),
}
args = (a, b, m, v, ids, img, w, spd)
dargs = tuple(t.to(D) for t in args)
bad = []
with torch_tpu.eager_mode(MODE), torch_tpu.precision(HIGHEST):
    for name, fn in CASES.items():
        got = fn(*dargs)
        if got.device != D:
            bad.append(f"{name}: on {got.device}")
            continue
        ref = fn(*args)
        if not torch.allclose(got.cpu().to(ref.dtype), ref, rtol=1e-4, atol=1e-5):
            bad.append(f"{name}: values differ")
    # backward on tpu:1: gradients live with their parameters
    lin = torch.nn.Linear(6, 3).to(D)
    lin(dargs[0]).square().sum().backward()
    if lin.weight.grad.device != D:
        bad.append(f"grad on {lin.weight.grad.device}")
    # factories follow the current device
    with torch.tpu.device(1):
        if torch.empty(2, device="tpu").device != D:
            bad.append("factory under torch.tpu.device(1)")
    try:
        torch.ones(2, device="tpu:0") + torch.ones(2, device="tpu:1")
        bad.append("cross-device add did not raise")
    except RuntimeError as e:
        if "got tpu:1 and tpu:0" not in str(e) and "got tpu:0 and tpu:1" not in str(e):
            bad.append(f"cross-device message: {e}")
    torch.tpu.synchronize()
    if torch.tpu.memory_allocated(0) != 0:
        bad.append(f"device 0 holds {torch.tpu.memory_allocated(0)} bytes")
print("BAD", bad)
"""


@pytest.mark.parametrize("mode", ["strict", "fused", "debug"])
def test_results_live_on_the_inputs_device(mode):
    env = dict(os.environ, TORCH_TPU_NUM_DEVICES="2")
    r = subprocess.run([sys.executable, "-c", _CHILD.replace("MODE_NAME", mode)], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "BAD []" in r.stdout, r.stdout[-3000:]


def test_queue_is_bounded():
    x = torch.randn(64, 64).to("tpu")
    torch.tpu.synchronize()
    worst = 0
    for i in range(3000):
        y = x @ x
        if i % 100 == 99:
            worst = max(worst, _C._stream_backlog(0))
    torch.tpu.synchronize()
    assert worst <= 1024, f"{worst} commands queued ahead of the device"
    assert _C._stream_backlog(0) == 0
    torch.testing.assert_close(y.cpu(), (x.cpu() @ x.cpu()), rtol=2e-2, atol=2e-1)
