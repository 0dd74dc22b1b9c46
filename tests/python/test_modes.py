"""Execution modes: strict (async, in order) and debug (sync); errors at sync points."""
import os
import subprocess
import sys

import pytest
import torch

import torch_tpu
from torch_tpu import EagerMode


def test_default_mode_is_strict():
    assert torch_tpu.get_eager_mode() is EagerMode.DEFER_NEVER


def test_strict_returns_before_the_op_ran():
    # A big matmul chain is queued; the call returns while the stream still works.
    a = torch.randn(512, 512).to("tpu")
    before = torch_tpu.metrics()["ops_executed"]["strict"]
    import time
    t0 = time.perf_counter()
    b = a
    for _ in range(20):
        b = b @ a
    t_enqueue = time.perf_counter() - t0
    t0 = time.perf_counter()
    torch.tpu.synchronize()
    t_wait = time.perf_counter() - t0
    assert torch_tpu.metrics()["ops_executed"]["strict"] >= before + 20
    # 20 matmuls of 512^3 take tens of ms; enqueueing them takes far less.
    assert t_wait > t_enqueue


def test_debug_mode_context_and_results():
    x = torch.randn(4, 5)
    with torch_tpu.eager_mode(EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING):
        assert torch_tpu.get_eager_mode() is EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING
        before = torch_tpu.metrics()["ops_executed"]["debug"]
        y = (x.to("tpu") * 3).exp()
        assert torch_tpu.metrics()["ops_executed"]["debug"] > before
    assert torch_tpu.get_eager_mode() is EagerMode.DEFER_NEVER
    torch.testing.assert_close(y.cpu(), (x * 3).exp())


def test_set_eager_mode_global():
    torch_tpu.set_eager_mode(EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING)
    try:
        assert torch_tpu.get_eager_mode() is EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING
    finally:
        torch_tpu.set_eager_mode(EagerMode.DEFER_NEVER)
    with pytest.raises(TypeError):
        torch_tpu.set_eager_mode("strict")


def test_in_order_mutation():
    t = torch.zeros(1000, device="tpu")
    for i in range(50):
        t.add_(1)
        t.mul_(2)
    ref = torch.zeros(1000)
    for i in range(50):
        ref.add_(1)
        ref.mul_(2)
    torch.testing.assert_close(t.cpu(), ref)


def test_sync_points():
    x = torch.arange(6, dtype=torch.float32, device="tpu").reshape(2, 3)
    y = x * 2
    assert y.sum().item() == 30.0
    assert y.tolist() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]
    assert "tpu:0" in repr(y)
    torch.tpu.synchronize()




def test_launch_blocking_env_selects_debug():
    code = "import torch_tpu; print(torch_tpu.get_eager_mode())"
    env = dict(os.environ, TORCH_TPU_LAUNCH_BLOCKING="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "DEFER_NEVER_AND_LAUNCH_BLOCKING" in out.stdout, out.stderr


def test_async_error_raises_at_sync_point_naming_the_op():
    # The failure happens inside the worker; strict mode returns first and raises at sync.
    torch_tpu._C._inject_async_failure()
    with pytest.raises(RuntimeError, match=r"\[test::inject_failure\]"):
        torch.tpu.synchronize()
    # The stream recovers after the error was reported.
    assert torch.ones(2, device="tpu").sum().item() == 2.0


def test_async_error_in_debug_mode_raises_at_the_call():
    with torch_tpu.eager_mode(EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING):
        with pytest.raises(RuntimeError, match=r"\[test::inject_failure\]"):
            torch_tpu._C._inject_async_failure()


def test_window_flushed_at_a_sync_point_runs_once_and_counts():
    # A fused window flushed by .item() / synchronize() runs on the calling thread when the
    # stream is idle (exec::flush_for_wait); it is still one fused command, in stream order
    # after the strict ops queued before it, and its errors still raise at the sync.
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    t = x.to("tpu")
    big = torch.ones(512, 512).to("tpu")
    for _ in range(3):
        big = big * 1.0001  # strict work queued (large: it goes to the worker)
    with torch_tpu.eager_mode(torch_tpu.EagerMode.DEFER_AND_FUSE):
        before = torch_tpu.metrics()["ops_executed"]["fused"]
        y = (t * 2 + 1).softmax(-1).sum() + big[0, 0]
        got = y.item()
        assert torch_tpu.metrics()["ops_executed"]["fused"] == before + 1
        want = ((x * 2 + 1).softmax(-1).sum() + torch.ones(512, 512)[0, 0] * 1.0001 ** 3).item()
        assert got == pytest.approx(want, rel=1e-6)
        z = t.log1p()
        torch.tpu.synchronize()
        assert torch_tpu.metrics()["ops_executed"]["fused"] == before + 2
        torch.testing.assert_close(z.cpu(), x.log1p())
        with pytest.raises(IndexError):  # row 5 of 3: the window's range check raises at the sync
            t[torch.tensor([0, 5]).to("tpu")].sum().item()
