"""Device layer: registration, torch.tpu API, allocator stats, RNG state, streams/events,
storage resize, serialization, autocast. Expectations are what CPU/CUDA users see."""
import io
import os
import subprocess
import sys

import pytest
import torch

import torch_tpu  # noqa: F401
from op_harness import in_mode, modes


def test_device_registered():
    assert torch.device("tpu").type == "tpu"
    assert torch.device("tpu:0").index == 0
    assert torch.tpu.is_available()
    assert torch.tpu.device_count() >= 1
    assert torch.get_device_module("tpu") is torch.tpu
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("tpu")
    assert torch.accelerator.device_count() == torch.tpu.device_count()
    assert torch.accelerator.current_device_index() == torch.tpu.current_device() == 0


def test_tensor_and_module_methods():
    t = torch.empty(3, device="tpu")
    assert t.device == torch.device("tpu:0") and t.is_tpu
    assert not torch.ones(2).is_tpu
    assert torch.ones(2).tpu().is_tpu
    m = torch.nn.Linear(2, 2).tpu()
    assert m.weight.device.type == "tpu"
    assert torch.empty(0, device="tpu").device.type == "tpu"


def test_device_context_and_index():
    assert torch.tpu.current_device() == 0
    with torch.tpu.device(0):
        assert torch.tpu.current_device() == 0
    with torch.tpu.device(None):
        assert torch.tpu.current_device() == 0
    with pytest.raises(Exception, match="device"):
        torch.tpu.set_device(torch.tpu.device_count())
    t = torch.empty(1, device="tpu")
    with torch.tpu.device_of(t):
        assert torch.tpu.current_device() == 0
    torch.tpu._lazy_init()
    assert torch.tpu.is_initialized() and not torch.tpu._is_in_bad_fork()


def test_two_devices_in_subprocess():
    code = (
        "import torch, torch_tpu\n"
        "assert torch.tpu.device_count() == 2\n"
        "with torch.tpu.device(1):\n"
        "    assert torch.tpu.current_device() == 1\n"
        "    assert torch.accelerator.current_device_index() == 1\n"
        "    s = torch.tpu.current_stream()\n"
        "    assert s.device_index == 1\n"
        "assert torch.tpu.current_device() == 0\n"
        "torch.tpu.manual_seed_all(5)\n"
        "assert all(torch.tpu.get_rng_state(i)[:8].view(torch.int64).item() == 5 for i in range(2))\n"
    )
    env = dict(os.environ, TORCH_TPU_NUM_DEVICES="2")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# --- allocator -------------------------------------------------------------------------------
def test_memory_stats_move_with_tensors():
    torch.tpu.synchronize()
    torch.tpu.empty_cache()
    base = torch.tpu.memory_allocated()
    t = torch.empty(1000, device="tpu")  # 4000 B: host rounds to a 512 B multiple; pjrt keeps arrays exact
    assert torch.tpu.memory_allocated() - base == (4096 if torch_tpu.get_runtime() == "host" else 4000)
    assert torch.tpu.memory_reserved() >= torch.tpu.memory_allocated()
    stats = torch.tpu.memory_stats()
    for k in ("allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
              "reserved_bytes.all.peak", "num_alloc_retries", "allocation.all.allocated",
              "allocation.all.freed", "requested_bytes.all.current"):
        assert k in stats
    del t
    torch.tpu.synchronize()
    assert torch.tpu.memory_allocated() == base
    reserved = torch.tpu.memory_reserved()
    t2 = torch.empty(1000, device="tpu")  # reuses the cached block
    assert torch.tpu.memory_reserved() == reserved
    del t2
    torch.tpu.empty_cache()
    assert torch.tpu.memory_reserved() == torch.tpu.memory_allocated() == base


def test_peak_reset_and_accelerator_api():
    torch.tpu.reset_peak_memory_stats()
    base = torch.tpu.max_memory_allocated()
    t = torch.empty(1 << 20, device="tpu")  # 4 MiB (large pool)
    assert torch.tpu.max_memory_allocated() >= base + (4 << 20)
    del t
    assert torch.tpu.max_memory_allocated() >= base + (4 << 20)
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == torch.tpu.memory_allocated()
    assert torch.accelerator.memory_allocated() == torch.tpu.memory_allocated()
    assert torch.tpu.memory_stats()["allocated_bytes.large_pool.freed"] >= 4 << 20
    torch.accelerator.empty_cache()


def test_data_ptr_aligned_and_storage_device():
    t = torch.empty(3, dtype=torch.uint8, device="tpu")
    assert t.data_ptr() % 64 == 0
    assert t.untyped_storage().device == torch.device("tpu:0")


@pytest.mark.parametrize("mode", modes())
def test_lazy_clone_copy_on_write(mode):
    """In every mode: in fused mode the clone shared memory that the pending window had not
    written yet, and read whatever it held (the window tracks storages, not memory). Fresh
    random values, so that memory left by an earlier test cannot pass for the right ones."""
    x, y = torch.rand(5), torch.rand(5)
    with in_mode(mode):
        t = x.tpu()
        c = torch._lazy_clone(t)  # needs "simple" DataPtrs and Allocator.copy_data
        c.add_(1)
        assert torch.equal(t.cpu(), x) and torch.equal(c.cpu(), x + 1)
        u = y.tpu() * 2  # pending in fused mode
        d = torch._lazy_clone(u)
        u.add_(1)  # the writer is the original this time; the clone keeps the old values
        e = d * 3  # a read of the still-shared clone
        assert torch.equal(u.cpu(), y * 2 + 1) and torch.equal(d.cpu(), y * 2)
        assert torch.equal(e.cpu(), y * 2 * 3)


def test_frees_from_other_threads():
    import threading

    torch.tpu.synchronize()
    base = torch.tpu.memory_allocated()
    ts = [torch.empty(256, device="tpu") for _ in range(64)]

    def drop(chunk):
        chunk.clear()

    threads = [threading.Thread(target=drop, args=(ts[i::4],)) for i in range(4)]
    del ts
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert torch.tpu.memory_allocated() == base


def test_pin_memory_does_not_raise():
    p = torch.ones(3).pin_memory()
    assert p.device.type == "cpu" and torch.equal(p, torch.ones(3))


def test_out_of_memory_capacity():
    code = (
        "import torch, torch_tpu\n"
        "a = torch.empty(1 << 18, device='tpu')\n"  # 1 MiB of a 2 MiB capacity
        "try:\n"
        "    torch.empty(1 << 19, device='tpu')\n"
        "except torch.OutOfMemoryError as e:\n"
        "    assert 'out of memory' in str(e)\n"
        "else:\n"
        "    raise SystemExit('no OOM')\n"
        "del a\n"
        "b = torch.empty(1 << 19, device='tpu')\n"  # fits after the cache is dropped
        "assert torch.tpu.memory_stats()['num_alloc_retries'] >= 1\n"
        "assert torch.tpu.get_device_properties().total_memory == 2 << 20\n"
    )
    env = dict(os.environ, TORCH_TPU_MEMORY_CAPACITY=str(2 << 20))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr + r.stdout


def test_device_properties():
    p = torch.tpu.get_device_properties()
    assert p.name == torch.tpu.get_device_name() and p.total_memory > 0 and p.multi_processor_count >= 1


# --- RNG ---------------------------------------------------------------------------------------
def test_rng_state_layout_and_round_trip():
    torch.tpu.manual_seed(1234)
    s = torch.tpu.get_rng_state()
    assert s.dtype == torch.uint8 and s.device.type == "cpu" and s.numel() == 16
    assert s[:8].view(torch.int64).item() == 1234 and s[8:].view(torch.int64).item() == 0
    assert torch.tpu.initial_seed() == 1234
    g = torch.tpu.default_generators[0]
    assert g.device == torch.device("tpu:0") and torch.tpu._get_generator("tpu") is g
    g.set_offset(8)
    assert g.get_offset() == 8
    s2 = torch.tpu.get_rng_state()
    torch.tpu.set_rng_state(s)
    assert torch.equal(torch.tpu.get_rng_state(), s)
    torch.tpu.set_rng_state(s2)
    assert g.get_offset() == 8
    with pytest.raises(RuntimeError, match="16"):
        torch.tpu.set_rng_state(torch.zeros(5, dtype=torch.uint8))


def test_random_ops_reproducible():
    torch.manual_seed(0)
    a = torch.randn(16, device="tpu")
    torch.manual_seed(0)
    b = torch.randn(16, device="tpu")
    assert torch.equal(a.cpu(), b.cpu())
    assert torch.tpu.default_generators[0].get_offset() > 0  # counters were reserved
    c = torch.randn(16, device="tpu")
    assert not torch.equal(a.cpu(), c.cpu())


def test_backward_on_autograd_thread():
    x = torch.ones(3, device="tpu", requires_grad=True)
    (x * 2).sum().backward()
    assert torch.equal(x.grad.cpu(), torch.full((3,), 2.0))
    assert torch.tpu.current_device() == 0


def test_manual_seed_global_and_generators():
    torch.manual_seed(7)  # reaches torch.tpu.manual_seed_all
    assert torch.tpu.initial_seed() == 7
    g = torch.Generator(device="tpu")
    assert g.device.type == "tpu"
    g.manual_seed(3)
    assert g.initial_seed() == 3 and g.get_state()[:8].view(torch.int64).item() == 3
    g2 = g.clone_state()
    assert torch.equal(g2.get_state(), g.get_state())
    torch.tpu.seed()
    states = torch.tpu.get_rng_state_all()
    torch.tpu.set_rng_state_all(states)
    with torch.random.fork_rng(device_type="tpu"):
        torch.tpu.manual_seed(99)
    assert torch.equal(torch.tpu.get_rng_state(), states[0])


# --- streams and events -------------------------------------------------------------------------
def test_streams():
    s0 = torch.tpu.current_stream()
    assert isinstance(s0, torch.tpu.Stream) and isinstance(s0, torch.Stream)
    assert s0 == torch.tpu.default_stream() and s0.device == torch.device("tpu:0")
    s1 = torch.tpu.Stream()
    s2 = torch.tpu.Stream(priority=-1)
    assert s1.stream_id != s2.stream_id != s0.stream_id and s1.device_index == 0
    with torch.tpu.stream(s1):
        assert torch.tpu.current_stream() == s1
        assert torch.accelerator.current_stream() == s1
    assert torch.tpu.current_stream() == s0
    with s2:
        assert torch.tpu.current_stream() == s2
    assert torch.tpu.current_stream() == s0
    s1.wait_stream(s0)
    s1.synchronize()
    assert s1.query()
    assert torch.Stream(device="tpu").device_index == 0  # index -1 resolved
    torch.empty(4, device="tpu").record_stream(s1)


def test_events():
    e = torch.tpu.Event()
    assert isinstance(e, torch.Event) and e.query()  # never recorded: complete
    x = torch.empty(100, device="tpu")
    e.record()
    torch.tpu.current_stream().wait_event(e)
    e.synchronize()
    assert e.query()
    ev = torch.tpu.current_stream().record_event()
    ev.synchronize()
    del x


def test_event_elapsed_time():
    a = torch.tpu.Event(enable_timing=True)
    b = torch.tpu.Event(enable_timing=True)
    a.record()
    b.record()
    b.synchronize()
    ms = a.elapsed_time(b)
    assert 0.0 <= ms < 10_000
    c = torch.tpu.Event()
    c.record()
    with pytest.raises((RuntimeError, ValueError), match="enable_timing"):
        a.elapsed_time(c)


# --- storage, serialization, autocast -------------------------------------------------------------
def test_untyped_storage_resize():
    t = torch.arange(4, dtype=torch.float32).tpu()
    st = t.untyped_storage()
    st.resize_(32)
    assert st.nbytes() == 32 and st.device.type == "tpu"
    assert torch.equal(t.cpu(), torch.arange(4, dtype=torch.float32))
    st.resize_(0)  # FSDP2 frees parameters this way
    assert st.nbytes() == 0
    st.resize_(16)
    assert st.nbytes() == 16


def test_save_load(tmp_path):
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3).tpu()
    f = tmp_path / "t.pt"
    torch.save({"t": t}, f)
    back = torch.load(f)["t"]
    assert back.device == torch.device("tpu:0") and torch.equal(back.cpu(), t.cpu())
    on_cpu = torch.load(f, map_location="cpu")["t"]
    assert on_cpu.device.type == "cpu" and torch.equal(on_cpu, t.cpu())
    buf = io.BytesIO()
    torch.save(torch.ones(3), buf)
    buf.seek(0)
    moved = torch.load(buf, map_location="tpu")
    assert moved.device.type == "tpu" and torch.equal(moved.cpu(), torch.ones(3))


def test_autocast_enters():
    with torch.autocast("tpu", dtype=torch.bfloat16):
        assert torch.is_autocast_enabled("tpu")
        assert torch.get_autocast_dtype("tpu") == torch.bfloat16
    assert torch.tpu.get_amp_supported_dtype() == [torch.bfloat16, torch.float16, torch.float32]


def test_dynamo_interface_registered_lazily():
    code = (
        "import sys, torch, torch_tpu\n"
        "from torch._dynamo import device_interface as di\n"
        "itf = di.get_interface_for_device('tpu')\n"
        "assert itf is not di.TpuInterface and itf.Stream is torch.tpu.Stream, itf\n"
        "assert di.get_interface_for_device('tpu:0') is itf\n"
        "assert itf.current_device() == 0 and itf.is_available()\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_double_import_is_harmless():
    import importlib
    importlib.reload(torch_tpu)
    assert torch.tpu is sys.modules["torch_tpu.device"]


def test_fork_after_init_is_bad_fork():
    code = (
        "import os, torch, torch_tpu\n"
        "torch.empty(1, device='tpu')\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os._exit(0 if torch.tpu._is_in_bad_fork() and not torch.tpu.is_initialized() else 1)\n"
        "_, st = os.waitpid(pid, 0)\n"
        "assert os.waitstatus_to_exitcode(st) == 0\n"
        "assert not torch.tpu._is_in_bad_fork()\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
