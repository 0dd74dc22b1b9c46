"""Memory capacity and OOM (issue 18): with TORCH_TPU_MEMORY_CAPACITY set, an allocation past
it raises torch.OutOfMemoryError naming the requested, allocated and reserved bytes and the
capacity; the device keeps computing correct values after; empty_cache returns cached blocks;
memory_stats / memory_summary / max_memory_allocated / reset_peak_memory_stats behave as on
CUDA. Each case runs in a subprocess (the capacity is read once per process)."""
import os
import subprocess
import sys

import pytest

MODES = ["DEFER_NEVER", "DEFER_AND_FUSE", "DEFER_NEVER_AND_LAUNCH_BLOCKING"]

OOM_CODE = r"""
import re, torch, torch_tpu
torch_tpu.set_eager_mode(torch_tpu.EagerMode.{mode})
MiB = 1 << 20
a = torch.ones(512, 512, device="tpu")  # 1 MiB
keep = []
try:
    for i in range(100):  # 16 MiB of capacity: fails near the 15th result
        keep.append(a @ a + i)
        if i % 4 == 0:
            keep[-1].sum().item()
    raise SystemExit("no OOM")
except torch.OutOfMemoryError as e:
    msg = str(e)
assert 10 <= len(keep) <= 15, len(keep)
m = re.search(r"tried to allocate (\d+) bytes with (\d+) bytes allocated, (\d+) bytes reserved, capacity (\d+)", msg)
assert m and "out of memory on tpu:0" in msg, msg
requested, allocated, reserved, capacity = map(int, m.groups())
assert requested == MiB and capacity == 16 * MiB and allocated <= reserved <= capacity, msg
assert reserved + requested > capacity, msg
s = torch.tpu.memory_stats()
assert s["num_ooms"] == 1 and s["num_alloc_retries"] >= 1, s
# The tensors computed before the error hold their values; the device keeps working.
for i in (0, len(keep) - 1):
    assert torch.equal(keep[i].cpu(), torch.full((512, 512), 512.0 + i))
del keep
torch.tpu.synchronize()
assert torch.tpu.memory_allocated() == MiB  # only `a`
assert torch.tpu.memory_reserved() >= 8 * MiB  # the freed blocks stay cached...
torch.tpu.empty_cache()
assert torch.tpu.memory_reserved() == MiB, torch.tpu.memory_reserved()  # ...until empty_cache
x = torch.randn(64, 64)
got = (x.to("tpu") * 3 + 1).sum(0)
torch.testing.assert_close(got.cpu(), (x * 3 + 1).sum(0))
big = [a @ a for _ in range(12)]  # the whole capacity is usable again
assert torch.equal(big[-1].cpu(), torch.full((512, 512), 512.0))
print("ok")
"""


def _run(code, capacity):
    env = dict(os.environ, TORCH_TPU_MEMORY_CAPACITY=capacity)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("mode", MODES)
def test_oom_message_and_recovery(mode):
    r = _run(OOM_CODE.replace("{mode}", mode), "16MiB")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr + r.stdout


def test_single_allocation_larger_than_capacity():
    code = ("import torch, torch_tpu\n"
            "try:\n"
            "    torch.empty(1 << 30, dtype=torch.uint8, device='tpu')\n"
            "except torch.OutOfMemoryError as e:\n"
            "    assert 'tried to allocate 1073741824 bytes' in str(e) and 'capacity 1000000' in str(e), str(e)\n"
            "else:\n"
            "    raise SystemExit('no OOM')\n"
            "print(torch.arange(3, device='tpu').sum().item())\n")
    r = _run(code, "1MB")
    assert r.returncode == 0 and r.stdout.strip() == "3", r.stderr + r.stdout


@pytest.mark.parametrize("value,capacity", [("16GB", 16 * 10**9), ("2.5 MiB", 5 << 19)])
def test_capacity_units(value, capacity):
    code = "import torch, torch_tpu\ntorch.ones(2, device='tpu')\nprint(torch.tpu.mem_get_info()[1])"
    r = _run(code, value)
    assert r.returncode == 0 and int(r.stdout) == capacity, r.stderr


@pytest.mark.parametrize("value", ["0", "16XB"])  # more in test_runtime_seam
def test_malformed_capacity_is_a_python_error(value):
    code = ("import torch, torch_tpu\n"
            "try:\n"
            "    torch.ones(2, device='tpu')\n"
            "except RuntimeError as e:\n"
            "    print(e)\n")
    r = _run(code, value)
    assert r.returncode == 0, r.stderr  # raised and caught: never an abort
    assert f"TORCH_TPU_MEMORY_CAPACITY invalid; got '{value}'" in r.stdout, r.stdout


def test_memory_stats_keys_and_peaks():
    import torch

    import torch_tpu  # noqa: F401

    torch.tpu.synchronize()
    torch.tpu.empty_cache()
    torch.tpu.reset_peak_memory_stats()
    base = torch.tpu.memory_allocated()
    x = torch.empty(1 << 20, device="tpu")  # 4 MiB
    s = torch.tpu.memory_stats()
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak", "allocated_bytes.all.allocated",
                "allocated_bytes.all.freed", "reserved_bytes.all.current", "reserved_bytes.all.peak",
                "active_bytes.all.current", "requested_bytes.all.current", "segment.all.current",
                "allocation.all.current", "num_alloc_retries", "num_ooms", "num_device_alloc",
                "num_device_free"):
        assert key in s, key
    assert s["allocated_bytes.all.current"] == base + (4 << 20) == torch.tpu.memory_allocated()
    assert s["reserved_bytes.all.current"] == torch.tpu.memory_reserved() >= base + (4 << 20)
    del x
    assert torch.tpu.max_memory_allocated() == base + (4 << 20)
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == torch.tpu.memory_allocated() == base
    assert torch.tpu.max_memory_reserved() == torch.tpu.memory_reserved()
    summary = torch.tpu.memory_summary()
    assert "Allocated memory" in summary and "TPU reserved memory" in summary
    torch.tpu.synchronize()
    torch.tpu.empty_cache()
    assert torch.tpu.memory_reserved() <= base or torch.tpu.memory_reserved() < s["reserved_bytes.all.current"]
