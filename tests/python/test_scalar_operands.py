"""Python scalars are run-time operands, not cache keys: an optimizer's or scheduler's new
scalar every step neither grows host memory nor re-lowers the op (issue 21, item 2), and a
graph recorded for one value computes the right result for every other value (the fast path
reads the value from the arguments at replay). Every cache is bounded."""
import os
import subprocess
import sys

import pytest
import torch

import torch_tpu
from torch_tpu import _C

VALUES = (0.5, -1.25, 1.0, 0.0, 3.0, 1e-8, -7.0)


def _entries():
    fp = torch_tpu.metrics()["fast_path"]
    return fp["entries"], fp["all_value_entries"]


def _t(shape=(3, 4), seed=0, low=-2.0, high=2.0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=g) * (high - low) + low


# (name, fn(tensors..., value)) over float tensors; each lowering binds the value with
# Lower::scalar_arg, so the graph is one for all values.
CASES = [
    ("add_alpha", lambda a, b, v: torch.add(a, b, alpha=v)),
    ("sub_alpha", lambda a, b, v: torch.sub(a, b, alpha=v)),
    ("add_scalar", lambda a, b, v: a + v),
    ("rsub_scalar", lambda a, b, v: v - a),
    ("mul_scalar", lambda a, b, v: a * v),
    ("div_scalar", lambda a, b, v: a / (v if v != 0 else 0.5)),
    ("div_floor", lambda a, b, v: torch.div(a, v if v != 0 else 0.5, rounding_mode="floor")),
    ("clamp", lambda a, b, v: torch.clamp(a, min=v - 1, max=v + 1)),
    ("clamp_min", lambda a, b, v: torch.clamp_min(a, v)),
    ("lerp", lambda a, b, v: torch.lerp(a, b, v)),
    ("addcdiv_", lambda a, b, v: a.clone().addcdiv_(b, b.abs() + 1, value=v)),
    ("addcmul", lambda a, b, v: torch.addcmul(a, a, b, value=v)),
    ("fill_", lambda a, b, v: a.clone().fill_(v)),
    ("masked_fill", lambda a, b, v: a.masked_fill(b > 0, v)),
    ("add_alpha_", lambda a, b, v: a.clone().add_(b, alpha=v)),
    ("mul_cpu0dim", lambda a, b, v: a * torch.tensor(v)),
]


MODES = {"strict": torch_tpu.EagerMode.DEFER_NEVER, "fused": torch_tpu.EagerMode.DEFER_AND_FUSE}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
def test_every_value_matches_cpu(name, fn, mode):
    a, b = _t(seed=1), _t(seed=2)
    ad, bd = a.to("tpu"), b.to("tpu")
    with torch_tpu.eager_mode(MODES[mode]):
        for v in VALUES:  # the first records, the rest replay with their own values
            got = fn(ad, bd, v).cpu()
            torch.testing.assert_close(got, fn(a, b, v), rtol=1.3e-6, atol=1e-5, msg=f"{name} value {v}")


def test_integer_and_bool_scalars_keep_their_kind():
    x = torch.arange(-4, 5)
    xd = x.to("tpu")
    for v in (2, -3, 7):
        assert torch.equal((xd * v).cpu(), x * v)
        assert torch.equal(torch.add(xd, xd, alpha=v).cpu(), torch.add(x, x, alpha=v))
    out = xd * 0.5  # a float scalar promotes an int tensor: another signature
    assert out.dtype == torch.float32 and torch.equal(out.cpu(), x * 0.5)
    bd = torch.tensor([True, False]).to("tpu")
    for v in (True, False):
        assert torch.equal(torch.add(bd, bd, alpha=v).cpu(), torch.add(bd.cpu(), bd.cpu(), alpha=v))


def test_new_scalar_values_record_no_new_entries():
    x = torch.ones(64, device="tpu")
    y = torch.ones(64, device="tpu")
    for i in range(3):  # warm up: record once
        x.add_(y, alpha=1e-3 * (i + 1))
        x.addcdiv_(y, y, value=-1e-4 * (i + 1))
        x.mul_(1 - 1e-5 * (i + 1))
    before = _entries()
    for i in range(500):
        x.add_(y, alpha=0.1 + 1e-3 * i)
        x.addcdiv_(y, y, value=-1e-4 * (i + 7))
        x.mul_(1 - 1e-6 * i)
    torch.tpu.synchronize()
    assert _entries() == before


def test_compile_cache_is_bounded():
    old = _C._compile_cache_capacity()
    try:
        _C._set_compile_cache_capacity(16)
        for n in range(1, 60):  # 59 shapes: 59 graphs
            (torch.ones(n, device="tpu") * 2).cpu()
        assert torch_tpu.metrics()["compile_cache"]["compilations"] <= 16
        torch.testing.assert_close((torch.ones(3, device="tpu") * 2).cpu(), torch.full((3,), 2.0))
    finally:
        _C._set_compile_cache_capacity(old)


_ADAMW_RSS = r"""
import torch, torch_tpu
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).to("tpu")
opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=STEPS)
x, y = torch.randn(8, 16).to("tpu"), torch.randn(8, 1).to("tpu")
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
def run(n):
    for _ in range(n):
        opt.zero_grad()
        torch.nn.functional.mse_loss(m(x), y).backward()
        opt.step()
        sched.step()
    torch.tpu.synchronize()
run(STEPS // 10)
r0 = rss()
run(STEPS - STEPS // 10)
print("RSS_GROWTH_MIB", rss() - r0)
"""


def test_adamw_cosine_loop_host_memory_is_flat():
    # Every step makes new Python scalars (bias corrections, the cosine learning rate).
    steps = int(os.environ.get("TORCH_TPU_RSS_STEPS", "2000"))
    code = _ADAMW_RSS.replace("STEPS", str(steps))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    growth = float(r.stdout.split("RSS_GROWTH_MIB")[1])
    assert growth < 5.0, f"host RSS grew {growth:.1f} MiB over {steps} AdamW + cosine steps"
