"""c10d backend tpu_dist with 2 and 4 spawned processes: every collective on tpu tensors equals
the same collective on CPU tensors with gloo (or, where gloo has no such op or dtype, the CPU
computation it stands for), in each eager mode, with inputs produced by queued ops and outputs
read by later ops; async Work and futures; mismatched shapes and dtypes raise on every rank; a
dead rank makes the others raise, naming the collective."""
import os

import pytest
import torch
import torch.distributed as dist

from dist_harness import spawn

MODES = ("DEFER_NEVER", "DEFER_NEVER_AND_LAUNCH_BLOCKING", "DEFER_AND_FUSE")


def _base(rank, n, dtype=torch.float32, salt=0):
    g = torch.Generator().manual_seed(1000 * rank + salt)
    if dtype.is_floating_point:
        return torch.randn(n, generator=g).to(dtype)
    return torch.randint(-5, 6, (n,), generator=g).to(dtype)


def _on(dev, t):
    """`t` on `dev`, produced by queued ops when dev is tpu (s * 2 - s == s exactly)."""
    s = t.to(dev)
    return s * 2 - s if t.dtype != torch.bool else s.clone()


def _read(ts):
    """Outputs read back through a later op on their device (ordered after the collective)."""
    return [(t * 1 if t.dtype != torch.bool else t.clone()).cpu() for t in ts]


# --- the cases: f(rank, world, dev) -> list of output tensors --------------------------------
def _all_reduce(op, dtype=torch.float32):
    def f(rank, world, dev):
        t = _on(dev, _base(rank, 7, dtype))
        dist.all_reduce(t, op=op)
        return [t]
    return f


def _all_reduce_ref(op, scale):
    """AVG / PREMUL_SUM, which gloo lacks: the reference is SUM of scaled CPU inputs."""
    def f(rank, world, dev):
        t = _on(dev, _base(rank, 7))
        if dev == "cpu":
            t.mul_(scale)
            dist.all_reduce(t)
        else:
            dist.all_reduce(t, op=op)
        return [t]
    return f


def _all_reduce_bf16(rank, world, dev):
    x = _base(rank, 9)
    if dev == "cpu":  # gloo cannot add bf16: the reference adds the bf16 values in float32
        t = x.to(torch.bfloat16).float()
        dist.all_reduce(t)
        return [t.to(torch.bfloat16)]
    t = _on(dev, x.to(torch.bfloat16))
    dist.all_reduce(t)
    return [t]


def _all_reduce_view(rank, world, dev):
    m = _on(dev, _base(rank, 12)).view(3, 4)
    if dev == "cpu":  # gloo reads a strided CPU tensor as if dense: the reference is contiguous
        v = m[:, 1:3].contiguous()
        dist.all_reduce(v)
        m[:, 1:3] = v
    else:
        dist.all_reduce(m[:, 1:3])  # a non-contiguous in-place output; the rest of m is untouched
    return [m]


def _all_gather(rank, world, dev):
    x = _on(dev, _base(rank, 5))
    outs = [torch.empty(5, device=dev) for _ in range(world)]
    dist.all_gather(outs, x)
    return outs


def _all_gather_bf16(rank, world, dev):
    x = _on(dev, _base(rank, 5, torch.int16)).view(torch.bfloat16)
    out = torch.empty(5 * world, dtype=torch.bfloat16, device=dev)
    if dev == "cpu":  # gloo moves no bf16: the reference moves the same bytes as uint8
        dist.all_gather_into_tensor(out.view(torch.uint8), x.view(torch.uint8))
    else:
        dist.all_gather_into_tensor(out, x)
    return [out.view(torch.int16)]


def _all_gather_into_tensor(rank, world, dev):
    x = _on(dev, _base(rank, 6, torch.int64)).view(2, 3)
    out = torch.empty(2 * world, 3, dtype=torch.int64, device=dev)
    dist.all_gather_into_tensor(out, x)
    return [out]


def _reduce_scatter(rank, world, dev):
    ins = [_on(dev, _base(rank, 4, salt=i)) for i in range(world)]
    out = torch.empty(4, device=dev)
    dist.reduce_scatter(out, ins)
    return [out]


def _reduce_scatter_tensor(op):
    def f(rank, world, dev):
        x = _on(dev, _base(rank, 3 * world))
        out = torch.empty(3, device=dev)
        if dev == "cpu" and op == dist.ReduceOp.AVG:
            dist.reduce_scatter_tensor(out, x)
            out /= world
        else:
            dist.reduce_scatter_tensor(out, x, op=op)
        return [out]
    return f


def _all_to_all_single(uneven):
    def f(rank, world, dev):
        if uneven:  # rank r sends (r + j + 1) rows to rank j
            ins = [rank + j + 1 for j in range(world)]
            outs = [i + rank + 1 for i in range(world)]
        else:
            ins = outs = None
        rows_in = sum(ins) if ins else 2 * world
        rows_out = sum(outs) if outs else 2 * world
        x = _on(dev, _base(rank, rows_in * 3)).view(rows_in, 3)
        out = torch.empty(rows_out, 3, device=dev)
        dist.all_to_all_single(out, x, outs, ins)
        return [out]
    return f


def _all_to_all(rank, world, dev):
    ins = [_on(dev, _base(rank, j + 1, salt=j)) for j in range(world)]
    outs = [torch.empty(rank + 1, device=dev) for _ in range(world)]
    if dev == "cpu":  # gloo has no list all_to_all: the reference sends through send/recv
        reqs = [dist.isend(ins[j], j) for j in range(world) if j != rank]
        reqs += [dist.irecv(outs[i], i) for i in range(world) if i != rank]
        outs[rank].copy_(ins[rank])
        for r in reqs:
            r.wait()
    else:
        dist.all_to_all(outs, ins)
    return outs


def _broadcast(rank, world, dev):
    t = _on(dev, _base(rank, 5, torch.int32))
    dist.broadcast(t, src=world - 1)
    return [t]


def _reduce(op):
    def f(rank, world, dev):
        t = _on(dev, _base(rank, 5))
        dist.reduce(t, dst=1, op=op)
        return [t] if rank == 1 else []  # a non-root's buffer is unspecified (gloo scribbles)
    return f


def _gather(rank, world, dev):
    x = _on(dev, _base(rank, 4))
    outs = [torch.empty(4, device=dev) for _ in range(world)] if rank == 0 else None
    dist.gather(x, outs, dst=0)
    return outs or []


def _scatter(rank, world, dev):
    ins = [_on(dev, _base(rank, 3, salt=i)) for i in range(world)] if rank == 1 else None
    out = torch.empty(3, device=dev)
    dist.scatter(out, ins, src=1)
    return [out]


def _send_recv(rank, world, dev):
    """A ring: isend to the right, irecv from the left (both posted before either waits)."""
    x = _on(dev, _base(rank, 6))
    got = torch.empty(6, device=dev)
    reqs = [dist.isend(x, (rank + 1) % world), dist.irecv(got, (rank - 1) % world)]
    for r in reqs:
        r.wait()
    return [got]


def _async_future(rank, world, dev):
    t = _on(dev, _base(rank, 4))
    w = dist.all_reduce(t, async_op=True)
    w.wait()
    fut = dist.all_reduce(_on(dev, _base(rank, 4, salt=1)), async_op=True).get_future()
    return [t, fut.wait()[0]]


def _coalesced(rank, world, dev):
    ts = [_on(dev, _base(rank, n, salt=n)) for n in (3, 5)]
    dist.all_reduce_coalesced(ts)
    outs = [[torch.empty(4, device=dev), torch.empty(2, 3, device=dev)] for _ in range(world)]
    dist.all_gather_coalesced(outs, [_on(dev, _base(rank, 4, salt=9)), _on(dev, _base(rank, 6, salt=8)).view(2, 3)])
    return ts + [t for per_rank in outs for t in per_rank]


def _reused_buffers(rank, world, dev):
    """8 KiB tensors: host buffers come back from the pool; two collectives in flight at once
    each get their own."""
    outs = []
    for k in range(3):
        t = _on(dev, _base(rank, 2048, salt=k))
        dist.all_reduce(t)
        outs.append(t)
    a, b = _on(dev, _base(rank, 2048, salt=5)), _on(dev, _base(rank, 2048, salt=6))
    wa, wb = dist.all_reduce(a, async_op=True), dist.all_reduce(b, async_op=True)
    wb.wait()
    wa.wait()
    return outs + [a, b]


CASES = {
    "all_reduce_sum": _all_reduce(dist.ReduceOp.SUM),
    "all_reduce_max": _all_reduce(dist.ReduceOp.MAX),
    "all_reduce_min_int": _all_reduce(dist.ReduceOp.MIN, torch.int64),
    "all_reduce_product": _all_reduce(dist.ReduceOp.PRODUCT),
    "all_reduce_sum_int": _all_reduce(dist.ReduceOp.SUM, torch.int32),
    "all_reduce_avg": None,  # filled in per world size (1 / world)
    "all_reduce_premul_sum": _all_reduce_ref(dist._make_nccl_premul_sum(0.25), 0.25),
    "all_reduce_bf16": _all_reduce_bf16,
    "all_reduce_view": _all_reduce_view,
    "all_gather": _all_gather,
    "all_gather_bf16": _all_gather_bf16,
    "all_gather_into_tensor": _all_gather_into_tensor,
    "reduce_scatter": _reduce_scatter,
    "reduce_scatter_tensor": _reduce_scatter_tensor(dist.ReduceOp.SUM),
    "reduce_scatter_tensor_avg": _reduce_scatter_tensor(dist.ReduceOp.AVG),
    "all_to_all_single": _all_to_all_single(False),
    "all_to_all_single_uneven": _all_to_all_single(True),
    "all_to_all": _all_to_all,
    "broadcast": _broadcast,
    "reduce_sum": _reduce(dist.ReduceOp.SUM),
    "reduce_max": _reduce(dist.ReduceOp.MAX),
    "gather": _gather,
    "scatter": _scatter,
    "send_recv": _send_recv,
    "async_future": _async_future,
    "reused_buffers": _reused_buffers,
    "coalesced": _coalesced,
}


def _check_cases(rank, world, mode_names):
    import torch_tpu

    assert torch_tpu.get_runtime() == os.environ.get("TORCH_TPU_RUNTIME", "host")
    cases = dict(CASES)
    cases["all_reduce_avg"] = _all_reduce_ref(dist.ReduceOp.AVG, 1.0 / world)
    for mode in mode_names:
        with torch_tpu.eager_mode(torch_tpu.EagerMode[mode]):
            for name, f in cases.items():
                want = [t.cpu() for t in f(rank, world, "cpu")]
                got = _read(f(rank, world, "tpu"))
                assert len(got) == len(want), name
                for g, w in zip(got, want):
                    assert g.dtype == w.dtype and g.shape == w.shape, f"{name} ({mode}): {g.dtype}{list(g.shape)}"
                    # the same bytes reach gloo and the same host sum runs: equal up to the
                    # division / scaling done in a different order
                    torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6, msg=lambda m, n=name: f"{n} ({mode}): {m}")
            dist.barrier()
    assert torch_tpu.metrics()["fallbacks"] == {}


@pytest.mark.parametrize("world", [2, 4])
def test_collectives_match_gloo(world):
    spawn(_check_cases, world, MODES if world == 2 else MODES[:1])


def _check_staging_path(rank, world, alias):
    import torch_tpu
    from torch_tpu.distributed import staging

    host = torch_tpu.get_runtime() == "host"
    t = torch.ones(1 << 18, device="tpu")
    assert staging.aliasable(t) == (host and alias)
    assert not staging.aliasable(t.view(512, 512).t())  # strided: staged
    assert not staging.aliasable(t, torch.float64)  # another dtype: staged
    staging.POOL.clear()
    dist.all_reduce(t)
    assert t.cpu().eq(world).all()
    # an aliased collective takes no host buffer; a staged one returns its buffer to the pool
    assert (staging.POOL.bytes == 0) == (host and alias), staging.POOL.bytes
    # AVG divides on the host: staged either way (no CPU kernel on tpu memory)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    assert t.cpu().eq(world).all() and staging.POOL.bytes > 0
    _check_cases(rank, world, MODES[:1])


@pytest.mark.parametrize("alias", [True, False], ids=["aliased", "staged"])
def test_collectives_aliased_and_staged(alias, monkeypatch):
    # On the host runtime gloo works in place on contiguous tpu tensors; TORCH_TPU_DIST_ALIAS=0
    # stages them as the pjrt runtime must. Both match gloo on CPU tensors.
    monkeypatch.setenv("TORCH_TPU_DIST_ALIAS", "1" if alias else "0")
    spawn(_check_staging_path, 2, alias)


# --- bad input and failures ---------------------------------------------------------------
def _mismatches(rank, world):
    from torch_tpu.distributed import CollectiveError

    bad = [
        ("all_reduce", lambda: dist.all_reduce(torch.ones(4 + rank, device="tpu"))),
        ("all_reduce", lambda: dist.all_reduce(torch.ones(4, device="tpu", dtype=(torch.float32, torch.int32)[rank]))),
        ("all_gather_into_tensor", lambda: dist.all_gather_into_tensor(
            torch.empty(2 * (3 + rank), device="tpu"), torch.ones(3 + rank, device="tpu"))),
        ("broadcast", lambda: dist.broadcast(torch.ones(2, 2 + rank, device="tpu"), src=0)),
        ("reduce_scatter_tensor", lambda: dist.reduce_scatter_tensor(
            torch.empty(2 + rank, device="tpu"), torch.ones(2 * (2 + rank), device="tpu"))),
        ("all_to_all_single", lambda: dist.all_to_all_single(
            torch.empty(3, device="tpu"), torch.ones(3, device="tpu"), [1 + rank, 2 - rank], [2, 1])),
    ]
    for name, f in bad:
        with pytest.raises(CollectiveError, match=rf"\[tpu_dist\] {name}.*rank"):
            f()
    t = torch.ones(3, device="tpu")  # the group is still usable
    dist.all_reduce(t)
    assert t.cpu().tolist() == [2.0] * 3


def test_mismatched_shapes_and_dtypes_raise_on_every_rank():
    spawn(_mismatches, 2)


def _dead_peer(rank, world, how):
    """DDP training of a small MLP on tpu; rank 1 dies (or hangs) at step 3. Rank 0's backward
    (where DDP all_reduces the gradients) must raise, naming the collective, in time."""
    import time

    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to("tpu"))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8).to("tpu")
    for step in range(100):
        if rank == 1 and step == 3:
            if how == "stuck":
                time.sleep(15)  # alive but silent, well past the group's 2 s timeout
            os._exit(0)
        t0 = time.monotonic()
        try:
            loss = model(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss.item()
        except RuntimeError as e:
            assert step == 3 and rank == 0, (step, rank, str(e))
            assert "[tpu_dist] all_reduce" in str(e) and "rank 0 of 2" in str(e), str(e)
            # within the 2 s group timeout (plus slack for a loaded machine), not at the exit
            assert time.monotonic() - t0 < 10, "raised late"
            return
    raise AssertionError("the dead peer went unnoticed")


@pytest.mark.parametrize("how", ["killed", pytest.param("stuck", marks=pytest.mark.dist_full)])
def test_dead_rank_makes_others_raise(how):
    spawn(_dead_peer, 2, how, pg_timeout=2, timeout=60)


def _backend_names(rank, world):
    from torch_tpu.distributed import TpuDistBackend

    # the world group was made with no backend: tpu's default is tpu_dist
    assert "tpu:tpu_dist" in str(dist.get_backend_config())
    assert isinstance(dist.group.WORLD._get_backend(torch.device("tpu")), TpuDistBackend)
    for name in ("tpu_dist", "tpu"):  # a single name serves both devices
        g = dist.new_group(backend=name)
        for dev in ("tpu", "cpu"):
            t = torch.full((3,), rank + 1.0, device=dev)
            dist.all_reduce(t, group=g)
            assert t.cpu().tolist() == [3.0] * 3, (name, dev)
        assert isinstance(g._get_backend(torch.device("cpu")), TpuDistBackend)
    # object collectives pickle into uint8 tensors on the group's device (tpu here)
    got = [None] * world
    dist.all_gather_object(got, {"rank": rank})
    assert got == [{"rank": r} for r in range(world)]
    objs = [f"from {rank}"]
    dist.broadcast_object_list(objs, src=1)
    assert objs == ["from 1"]


def test_backend_names_and_default():
    spawn(_backend_names, 2, backend=None)
