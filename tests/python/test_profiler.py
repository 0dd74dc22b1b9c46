"""torch.profiler on "tpu" (issue 21, item 5): a training step profiled with
ProfilerActivity.CPU + PrivateUse1 reports each command the device ran (an op's graph, a fused
window, a compiled graph, a transfer) with its device time, linked to the op that queued it,
tpu memory events with profile_memory=True, and a device lane in the Chrome trace."""
import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import torch_tpu
from torch_tpu import EagerMode

pytestmark = pytest.mark.skipif(not torch_tpu._C._profiler_available(), reason="built without Kineto headers")


@pytest.fixture(params=list(EagerMode), ids=lambda m: m.name)
def mode(request):
    with torch_tpu.eager_mode(request.param):
        yield request.param


def _step(model, opt, x):
    opt.zero_grad()
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    return loss.item()


def _profiled_step(**kw):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 16, device="tpu")
    _step(model, opt, x)  # warm: compiled executables cached
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], **kw) as prof:
        _step(model, opt, x)
    return prof


def test_supported_activity():
    assert ProfilerActivity.PrivateUse1 in torch.profiler.supported_activities()


def test_training_step_shows_device_time(mode):
    prof = _profiled_step()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
    assert kernels, "no device events"
    assert all(e.name.startswith("[tpu] ") and e.time_range.end >= e.time_range.start for e in kernels)
    rows = {e.key: e for e in prof.key_averages()}
    assert sum(e.self_device_time_total for e in rows.values()) > 0
    names = {e.name for e in kernels}
    if mode is EagerMode.DEFER_AND_FUSE:  # the step runs as fused windows, flushed by item()
        assert "[tpu] fused_window" in names
        assert rows["aten::_local_scalar_dense"].device_time_total > 0 or \
            rows["aten::item"].device_time_total > 0
    else:  # one command per op: its device time lands on the ATen op that queued it
        assert {"[tpu] aten::addmm", "[tpu] aten::mm"} <= names
        assert rows["aten::addmm"].self_device_time_total > 0
        # backward ops run on autograd's thread and are linked there too
        assert rows["aten::mm"].self_device_time_total > 0
    table = prof.key_averages().table(sort_by="device_time_total", row_limit=8)
    assert "Self TPU" in table and "[tpu] " in table


def test_memory_events(mode):
    prof = _profiled_step(profile_memory=True)
    mem = [e for e in prof.events() if e.name == "[memory]" and e.device_memory_usage != 0]
    assert mem, "no tpu memory events"
    assert any(e.device_memory_usage > 0 for e in prof.key_averages())
    assert all(e.cpu_memory_usage == 0 for e in mem)  # tpu allocations are not counted as CPU


def test_chrome_trace_has_device_lane(mode, tmp_path):
    prof = _profiled_step(profile_memory=True)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    evs = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in evs if e.get("cat") == "kernel"]
    assert kernels and all(e["dur"] >= 0 and e["pid"] == 0 for e in kernels)  # the tpu:0 lane
    assert any(e.get("ph") == "M" and e.get("pid") == 0 and e.get("name") == "process_name"
               and "tpu" in e["args"]["name"] for e in evs)
    # each device command points at the CPU op that queued it
    cpu_ids = {e["args"].get("External id") for e in evs if e.get("cat") == "cpu_op"}
    assert all(e["args"]["External id"] in cpu_ids for e in kernels)
    mem = [e for e in evs if e.get("name") == "[memory]"]
    assert any(e["args"]["Device Type"] == int(torch._C._autograd.DeviceType.PrivateUse1) for e in mem)
    if mode is not EagerMode.DEFER_AND_FUSE:
        assert "[tpu] aten::addmm" in {e["name"] for e in kernels}


def test_legacy_autograd_profiler_times_ops(mode):
    """torch.autograd.profiler.profile(use_device="tpu") (no Kineto device lane): device events
    around each op, as CUDA's fallback; no 'PrivateUse1 used in profiler but not enabled'."""
    a = torch.randn(64, 64, device="tpu")
    (a @ a).cpu()
    with torch.autograd.profiler.profile(use_device="tpu") as prof:
        (a @ a).tanh().sum().item()
    rows = {e.key: e for e in prof.key_averages()}
    assert rows["aten::mm"].device_time_total >= 0 and rows["aten::mm"].count == 1
    if mode is not EagerMode.DEFER_AND_FUSE:  # fused: the ops only record; the window runs at item()
        assert sum(e.self_device_time_total for e in rows.values()) > 0
