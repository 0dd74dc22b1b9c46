"""torch.cuda habits on "tpu" (issue 21, item 6): torch.tpu's memory_summary, mem_get_info,
utilization, is_bf16_supported, get_device_capability and amp; pin_memory; AdamW(fused=True) and SGD(fused=True);
metrics_report returning (not printing); the eager mode's scope. Each runs in every eager mode."""
import copy
import os
import subprocess
import sys
import threading

import pytest
import torch

import torch_tpu
from torch_tpu import EagerMode


@pytest.fixture(params=list(EagerMode), ids=lambda m: m.name)
def mode(request):
    with torch_tpu.eager_mode(request.param):
        yield request.param


def test_device_queries(mode):
    cap = torch.tpu.get_device_capability()
    assert isinstance(cap, tuple) and cap == (1, 0) and cap == torch.tpu.get_device_capability("tpu:0")
    assert torch.tpu.is_bf16_supported() is True
    assert torch.tpu.is_bf16_supported(including_emulation=False) is True


def test_mem_get_info_and_summary(mode, monkeypatch):
    x = torch.ones(256, 1024, device="tpu")  # 1 MiB
    free, total = torch.tpu.mem_get_info()
    assert isinstance(free, int) and isinstance(total, int) and 0 <= free <= total
    assert torch.tpu.mem_get_info("tpu:0")[1] == total
    stats = torch.tpu.memory_stats()
    assert stats["allocated_bytes.all.current"] >= x.numel() * 4
    s = torch.tpu.memory_summary()
    assert "PyTorch TPU memory summary, device ID 0" in s
    # The metric rows are torch.cuda.memory_summary's, computed from the same numbers.
    oversize = {f"oversize_{k}.{f}": 0 for k in ("allocations", "segments")
                for f in ("current", "peak", "allocated", "freed")}
    monkeypatch.setattr(torch.cuda.memory, "memory_stats", lambda device=None: {**stats, **oversize})
    for abbreviated in (False, True):
        monkeypatch.setattr(torch.tpu, "memory_stats", lambda device=None: stats)  # the same numbers
        ours = torch.tpu.memory_summary(abbreviated=abbreviated).split("\n")
        cuda = torch.cuda.memory.memory_summary(0, abbreviated=abbreviated).replace("GPU", "TPU").split("\n")
        assert ours[5:-2] == cuda[5:5 + len(ours) - 7] and ours[-2] == cuda[-2]
        assert all(len(line) == 77 for line in ours[:-1])
    del x


def test_mem_get_info_with_capacity():
    code = ("import torch, torch_tpu; x = torch.ones(1 << 18, device='tpu'); "
            "f, t = torch.tpu.mem_get_info(); print(f, t, torch.tpu.memory_reserved())")
    env = dict(os.environ, TORCH_TPU_MEMORY_CAPACITY="64MiB")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    free, total, reserved = map(int, out.stdout.split())
    assert total == 64 << 20 and reserved >= 1 << 20 and free == total - reserved


def test_utilization(mode):
    torch.tpu.synchronize()
    torch.tpu.utilization()  # starts a sample period
    a = torch.randn(256, 256, device="tpu")
    for _ in range(20):
        a = (a @ a).tanh()
    a.cpu()
    u = torch.tpu.utilization()
    assert isinstance(u, int) and 0 < u <= 100
    import time
    time.sleep(0.05)
    assert torch.tpu.utilization() == 0  # nothing ran in this period


def test_amp_aliases(mode):
    import torch.tpu.amp as tamp

    assert torch.tpu.amp is tamp
    a = torch.randn(8, 8, device="tpu")
    with torch.tpu.amp.autocast():
        assert (a @ a).dtype == torch.get_autocast_dtype("tpu")
    with torch.tpu.amp.autocast(dtype=torch.float16):
        assert (a @ a).dtype == torch.float16
    with torch.tpu.amp.autocast(enabled=False):
        assert (a @ a).dtype == torch.float32
    scaler = torch.tpu.amp.GradScaler(init_scale=4.0)
    assert isinstance(scaler, torch.amp.GradScaler) and scaler._device == "tpu"
    assert scaler.scale(a.sum()).item() == pytest.approx(4 * a.sum().item(), rel=1e-5)


def test_pin_memory(mode):
    x = torch.randn(64)
    assert not x.is_pinned()
    p = x.pin_memory()
    assert p.is_pinned() and p.device.type == "cpu" and torch.equal(p, x)
    assert p[3:].is_pinned()  # a view of pinned memory is pinned, as on CUDA
    assert torch.empty(8, pin_memory=True).is_pinned()
    t = p.to("tpu", non_blocking=True)
    assert torch.equal(t.cpu(), x)
    assert not p.clone().is_pinned()


def test_dataloader_pin_memory(mode):
    ds = torch.utils.data.TensorDataset(torch.arange(12.0).reshape(6, 2))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pin_memory_device's deprecation notice
        dl = torch.utils.data.DataLoader(ds, batch_size=3, pin_memory=True, pin_memory_device="tpu")
        batches = [b for (b,) in dl]
    assert all(b.is_pinned() for b in batches)
    assert torch.equal(torch.cat(batches), torch.arange(12.0).reshape(6, 2))


@pytest.mark.parametrize("cls,kw", [
    (torch.optim.AdamW, dict(weight_decay=0.1)),
    (torch.optim.AdamW, dict(amsgrad=True, maximize=True)),
    (torch.optim.Adam, dict(weight_decay=0.05, amsgrad=True)),
    (torch.optim.AdamW, dict(lr=torch.tensor(0.01))),
], ids=["adamw", "adamw-amsgrad-maximize", "adam-amsgrad", "adamw-tensor-lr"])
def test_fused_adam_matches_cpu(mode, cls, kw):
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
    models = {"cpu_fused": ref, "cpu_foreach": copy.deepcopy(ref), "tpu": copy.deepcopy(ref).to("tpu")}
    opts = {"cpu_fused": cls(models["cpu_fused"].parameters(), fused=True, **kw),
            "tpu": cls(models["tpu"].parameters(), fused=True, **kw)}
    if "lr" in kw:  # foreach takes no tensor lr
        del models["cpu_foreach"]
    else:
        opts["cpu_foreach"] = cls(models["cpu_foreach"].parameters(), foreach=True, **kw)
    xs = [torch.randn(4, 6) for _ in range(3)]
    with torch.tpu.precision(torch.tpu.Precision.HIGHEST):
        for x in xs:
            for name, m in models.items():
                opts[name].zero_grad()
                m(x.to("tpu") if name == "tpu" else x).square().sum().backward()
                opts[name].step()
    assert torch_tpu.metrics()["decompositions"].get(
        "aten::_fused_adamw_" + (".tensor_lr" if "lr" in kw else "") if cls is torch.optim.AdamW
        else "aten::_fused_adam_", 0) > 0
    for name in set(models) - {"tpu"}:
        for a, b in zip(models[name].parameters(), models["tpu"].parameters()):
            torch.testing.assert_close(b.cpu(), a.detach(), atol=1e-5, rtol=1e-5)
    st_cpu, st_tpu = opts["cpu_fused"].state_dict()["state"], opts["tpu"].state_dict()["state"]
    for k in st_cpu:
        for f in st_cpu[k]:
            torch.testing.assert_close(st_tpu[k][f].cpu(), st_cpu[k][f], atol=1e-5, rtol=1e-5)


def test_fused_adamw_grad_scale_and_found_inf(mode):
    torch.manual_seed(1)
    ps, gs, ms, vs = ([torch.randn(5) for _ in range(2)] for _ in range(4))
    vs = [v.abs() for v in vs]
    for inf in (0.0, 1.0):
        cpu = [[t.clone() for t in lst] for lst in (ps, gs, ms, vs)]
        dev = [[t.to("tpu") for t in lst] for lst in (ps, gs, ms, vs)]
        for (p, g, m, v), where in ((cpu, "cpu"), (dev, "tpu")):
            steps = [torch.tensor(3.0, device=where) for _ in p]
            torch._fused_adamw_(p, g, m, v, [], steps, lr=0.01, beta1=0.9, beta2=0.99, weight_decay=0.1, eps=1e-8,
                                amsgrad=False, maximize=False, grad_scale=torch.tensor(8.0, device=where),
                                found_inf=torch.tensor(inf, device=where))
        for lc, ld in zip(cpu, dev):
            for a, b in zip(lc, ld):
                torch.testing.assert_close(b.cpu(), a, atol=1e-6, rtol=1e-5)
        if inf:
            assert all(torch.equal(a, b) for a, b in zip(cpu[0], ps))  # skipped


def test_metrics_report_returns_without_printing(capsys, mode):
    torch.ones(2, device="tpu").add(1).cpu()
    text = torch_tpu.metrics_report()
    assert capsys.readouterr().out == ""
    assert text.startswith("torch_tpu metrics") and "memory:" in text


@pytest.mark.parametrize("m", list(EagerMode), ids=lambda m: m.name)
def test_eager_mode_is_global_and_its_context_thread_local(m):
    """set_eager_mode is process-wide (documented so, as TorchTPU's); eager_mode() is per thread."""
    assert "global" in torch_tpu.set_eager_mode.__doc__ and "thread" in torch_tpu.eager_mode.__doc__
    prev = torch_tpu.get_eager_mode()
    other = EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING if m is not EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING \
        else EagerMode.DEFER_AND_FUSE
    try:
        t = threading.Thread(target=torch_tpu.set_eager_mode, args=(m,))
        t.start()
        t.join()
        assert torch_tpu.get_eager_mode() is m  # set in one thread, seen in this one
        seen, entered, leave = {}, threading.Event(), threading.Event()

        def in_block():
            with torch_tpu.eager_mode(other):
                seen["inner"] = torch_tpu.get_eager_mode()
                entered.set()
                leave.wait(10)

        t = threading.Thread(target=in_block)
        t.start()
        assert entered.wait(10)
        assert torch_tpu.get_eager_mode() is m  # another thread's block stays there
        leave.set()
        t.join()
        assert seen["inner"] is other
        a = torch.arange(4.0, device="tpu")
        assert torch.equal((a * 2).cpu(), torch.arange(4.0) * 2)
    finally:
        torch_tpu.set_eager_mode(prev)


@pytest.mark.parametrize("kw", [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    dict(lr=0.05, momentum=0.8, dampening=0.3, maximize=True),
    dict(lr=torch.tensor(0.05), momentum=0.9),
], ids=["plain", "momentum", "nesterov-wd", "dampening-maximize", "tensor-lr"])
def test_fused_sgd_matches_cpu(mode, kw):
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
    tpu = copy.deepcopy(ref).to("tpu")
    o_cpu = torch.optim.SGD(ref.parameters(), fused=True, **kw)
    o_tpu = torch.optim.SGD(tpu.parameters(), fused=True, **kw)
    with torch.tpu.precision(torch.tpu.Precision.HIGHEST):
        for _ in range(3):
            x = torch.randn(4, 6)
            for m, o, d in ((ref, o_cpu, "cpu"), (tpu, o_tpu, "tpu")):
                o.zero_grad()
                m(x.to(d)).square().sum().backward()
                o.step()
    assert any(k.startswith("aten::_fused_sgd_") for k in torch_tpu.metrics()["decompositions"])
    for a, b in zip(ref.parameters(), tpu.parameters()):
        torch.testing.assert_close(b.cpu(), a.detach(), atol=1e-5, rtol=1e-5)
    for k, st in o_cpu.state_dict()["state"].items():
        for f, v in st.items():
            if isinstance(v, torch.Tensor):
                torch.testing.assert_close(o_tpu.state_dict()["state"][k][f].cpu(), v, atol=1e-5, rtol=1e-5)


def test_fused_sgd_grad_scale_and_found_inf(mode):
    torch.manual_seed(1)
    ps, gs, bs = ([torch.randn(5) for _ in range(2)] for _ in range(3))
    for inf in (0.0, 1.0):
        for first in (True, False):
            cpu = [[t.clone() for t in lst] for lst in (ps, gs, bs)]
            dev = [[t.to("tpu") for t in lst] for lst in (ps, gs, bs)]
            for (p, g, b), where in ((cpu, "cpu"), (dev, "tpu")):
                torch._fused_sgd_(p, g, b, weight_decay=0.1, momentum=0.9, lr=0.01, dampening=0.1, nesterov=True,
                                  maximize=False, is_first_step=first, grad_scale=torch.tensor(8.0, device=where),
                                  found_inf=torch.tensor(inf, device=where))
            for lc, ld in zip(cpu, dev):
                for a, b in zip(lc, ld):
                    torch.testing.assert_close(b.cpu(), a, atol=1e-6, rtol=1e-5)
