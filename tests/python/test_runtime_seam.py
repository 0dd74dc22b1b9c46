"""The runtime seam as a user meets it: stream-ordered memory reuse (a freed tensor's memory is
reused at once, while queued work may still read it), transfers, runtime selection, device-side
range checks, and capacity parsing."""
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import torch_tpu

MODES = [torch_tpu.EagerMode.DEFER_NEVER, torch_tpu.EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING,
         torch_tpu.EagerMode.DEFER_AND_FUSE]
MODE_IDS = ["strict", "debug", "fused"]


def _run(code, **env):
    full = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=300)


def test_reserved_memory_plateaus_without_sync():
    # Each iteration frees the previous result while its producer may still be queued: with
    # stream-ordered reuse the freed block serves the next allocation at once.
    torch.tpu.synchronize()
    torch.tpu.empty_cache()
    x = torch.randn(256, 256, device="tpu")
    y = x
    for _ in range(300):
        y = torch.tanh(y @ x) * 0.5
    reserved = torch.tpu.memory_reserved()
    block = 256 * 256 * 4
    assert reserved <= 8 * block, reserved  # was ~300 blocks before the reuse was stream-ordered
    assert torch.isfinite(y.cpu()).all()


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_freed_memory_reused_while_queued_keeps_values(mode):
    with torch_tpu.eager_mode(mode):
        a_cpu = torch.randn(1000, 100)
        a = a_cpu.to("tpu")
        outs = []
        for k in range(20):
            c = a * (k + 1)          # queued: reads a
            del a                    # a's block goes back to the pool at once
            a = torch.full((1000, 100), float(k), device="tpu")  # may take the same block
            outs.append(c)
            a = a * 0.0 + a_cpu.to("tpu")  # a holds a_cpu's values again (exactly)
        for k, c in enumerate(outs):
            torch.testing.assert_close(c.cpu(), a_cpu * (k + 1))


def test_empty_cache_with_queued_work_keeps_values():
    x = torch.randn(512, 512)
    t = x.to("tpu")
    ys = [t * i for i in range(8)]
    del ys[:4]
    torch.tpu.empty_cache()  # returns blocks whose users are still queued only after they ran
    for i, y in zip(range(4, 8), ys):
        torch.testing.assert_close(y.cpu(), x * i)


def test_storage_resize_copies_in_stream_order():
    t = torch.arange(10.0, device="tpu") * 2  # queued
    t.resize_(1000)  # grows the storage: the copy is queued after the producer
    torch.testing.assert_close(t[:10].cpu(), torch.arange(10.0) * 2)


def test_strided_download_and_upload():
    x = torch.randn(6, 8)
    t = x.to("tpu")
    torch.testing.assert_close(t[:, ::3].cpu(), x[:, ::3])
    torch.testing.assert_close(t.t().cpu(), x.t())
    dst = torch.empty(8, 6).t()  # a non-contiguous CPU destination
    dst.copy_(t)
    torch.testing.assert_close(dst, x)
    t[::2, 1::2] = torch.ones(3, 4)  # upload into a strided tpu view
    x[::2, 1::2] = 1
    torch.testing.assert_close(t.cpu(), x)


def test_runtime_selection():
    name = torch_tpu.get_runtime()
    assert name == os.environ.get("TORCH_TPU_RUNTIME", "host")
    torch_tpu.set_runtime(name)  # the one in use: fine
    with pytest.raises(RuntimeError, match="already in use"):
        torch_tpu.set_runtime("nonexistent")


def test_unknown_runtime_is_a_clear_error():
    r = _run("import torch, torch_tpu\ntorch.ones(2, device='tpu') + 1", TORCH_TPU_RUNTIME="nonexistent")
    assert r.returncode == 1, r.stderr  # a Python exception, not an abort
    assert "unknown runtime; got 'nonexistent', expected one of: host, pjrt" in r.stderr


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_nll_loss_target_out_of_range_raises(mode):
    logits = torch.randn(4, 5)
    with torch_tpu.eager_mode(mode):
        for bad in (5, -1):
            target = torch.tensor([0, 1, bad, 2])
            with pytest.raises(IndexError):
                F.cross_entropy(logits, target)  # CPU raises
            with pytest.raises(IndexError, match="Target is out of bounds"):  # as CPU
                F.cross_entropy(logits.to("tpu"), target.to("tpu")).cpu()
        # ignore_index is not a bad target; the device keeps working after the error
        target = torch.tensor([0, -100, 4, 2])
        got = F.cross_entropy(logits.to("tpu"), target.to("tpu")).cpu()
        torch.testing.assert_close(got, F.cross_entropy(logits, target))


@pytest.mark.parametrize("value,ok", [("1GB", True), ("2GiB", True), ("1048576", True), ("banana", False), ("-5", False)])
def test_memory_capacity_values(value, ok):
    r = _run("import torch, torch_tpu\nprint((torch.ones(4, device='tpu') + 1).sum().item())",
             TORCH_TPU_MEMORY_CAPACITY=value)
    if ok:
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "8.0"
    else:
        assert r.returncode == 1, r.stderr  # a Python exception, never an abort
        assert "TORCH_TPU_MEMORY_CAPACITY invalid" in r.stderr
