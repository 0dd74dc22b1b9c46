"""tpu tensors and multiprocessing (issue 21, item 4): never a hang. A tpu tensor crosses
torch.multiprocessing (mp.Queue, DataLoader workers) as a CPU copy rebuilt on tpu; a forked
child of a process that used tpu raises a clear RuntimeError at its first tpu use, as CUDA's.
Every wait has a timeout, so a hang fails the test instead of CI."""
import io
import multiprocessing
import pickle
import subprocess
import sys

import pytest
import torch
import torch.multiprocessing as mp
from multiprocessing.reduction import ForkingPickler

import torch_tpu
from torch_tpu import EagerMode

TIMEOUT = 90


@pytest.fixture(params=list(EagerMode), ids=lambda m: m.name)
def mode(request):
    with torch_tpu.eager_mode(request.param):
        yield request.param


def _roundtrip(obj):
    buf = io.BytesIO()
    ForkingPickler(buf, pickle.HIGHEST_PROTOCOL).dump(obj)
    return pickle.loads(buf.getvalue())


def test_forking_pickler_copies_tpu_tensors(mode):
    a = torch.arange(12.0, device="tpu").reshape(3, 4).t() * 2  # non-contiguous, pending work
    p = torch.nn.Parameter(torch.ones(3, device="tpu"))
    b, q, cpu = _roundtrip((a, p, torch.ones(2)))
    assert b.device == a.device and b.shape == a.shape and torch.equal(b.cpu(), a.cpu())
    assert isinstance(q, torch.nn.Parameter) and q.requires_grad and q.device.type == "tpu"
    assert cpu.device.type == "cpu"
    b.add_(1)
    assert not torch.equal(b.cpu(), a.cpu())  # a copy, not shared memory
    s = _roundtrip(a.contiguous().untyped_storage())
    assert s.device.type == "tpu" and s.nbytes() == 48
    with pytest.raises(RuntimeError, match="non-leaf"):
        _roundtrip(torch.ones(2, device="tpu", requires_grad=True) * 2)


def _double(q_in, q_out):
    t = q_in.get(timeout=TIMEOUT)
    # A list, not a CPU tensor: torch shares those by a file descriptor that the receiver
    # must fetch while this process is still alive.
    q_out.put((t.device.type, (t * 2).cpu().tolist()))


def test_queue_between_processes():
    ctx = mp.get_context("spawn")
    q_in, q_out = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_double, args=(q_in, q_out))
    p.start()
    try:
        q_in.put(torch.arange(5.0, device="tpu"))
        dev, out = q_out.get(timeout=TIMEOUT)
    finally:
        p.join(TIMEOUT)
        if p.is_alive():
            p.kill()
    assert dev == "tpu" and out == (torch.arange(5.0) * 2).tolist()
    assert p.exitcode == 0


def _use_tpu(q):
    try:
        torch.ones(2, device="tpu").add(1).cpu()
        q.put("ran")
    except RuntimeError as e:
        q.put(f"error: {e} in_bad_fork={torch.tpu._is_in_bad_fork()}")


def test_fork_child_raises_at_first_tpu_use(mode):
    torch.ones(2, device="tpu").add(1).cpu()
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_use_tpu, args=(q,))
    p.start()
    try:
        msg = q.get(timeout=TIMEOUT)
    finally:
        p.join(TIMEOUT)
        if p.is_alive():
            p.kill()
    assert msg.startswith("error: ") and "forked subprocess" in msg and "in_bad_fork=True" in msg
    assert not torch.tpu._is_in_bad_fork()
    assert torch.equal(torch.ones(2, device="tpu").cpu(), torch.ones(2))  # the parent is fine


def test_fork_before_tpu_use_works():
    """A child forked from a process that never ran a tpu op starts its own streams."""
    code = ("import multiprocessing as m, torch, torch_tpu\n"
            "def f(q): q.put((torch.arange(3.0, device='tpu') + 1).cpu().tolist())\n"
            "if __name__ == '__main__':\n"
            "    c = m.get_context('fork'); q = c.Queue(); p = c.Process(target=f, args=(q,)); p.start()\n"
            "    print(q.get(timeout=60)); p.join(60)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[1.0, 2.0, 3.0]"
