"""The PyTorch scaling APIs on tpu_dist with 2 spawned processes (DTensor also with 4): DDP
training of the README's GPT equals single-process training on the concatenated batch; an
FSDP2 (fully_shard) train step equals the unsharded one (and with bf16 mixed precision, to bf16
accuracy); DTensor distribute / redistribute /
matmul with sharded inputs equal CPU; functional collectives in eager and under
torch.compile(backend="tpu"); torchrun runs examples/ddp_gpt.py."""
import copy
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

from dist_harness import spawn

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _gpt():
    spec = importlib.util.spec_from_file_location("gpt_example", ROOT / "examples" / "gpt.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _setup(world, steps, layers=1):
    gpt = _gpt()
    torch.manual_seed(0)
    chars, data = gpt.load_data()
    cfg = gpt.Config(vocab=len(chars.chars), ctx=16, layers=layers, heads=2, width=32)
    gen = torch.Generator().manual_seed(1)
    batches = [gpt.get_batch(data, 2 * world, cfg.ctx, gen) for _ in range(steps)]
    return gpt, gpt.GPT(cfg), batches


def _assert_params_equal(got, want, tol=2e-5):
    for (name, p), q in zip(got, want):
        p = p.full_tensor() if hasattr(p, "full_tensor") else p
        torch.testing.assert_close(p.detach().cpu(), q.detach().cpu(), atol=tol, rtol=tol,
                                   msg=lambda m, n=name: f"{n}: {m}")


def _ddp(rank, world):
    from torch.nn.parallel import DistributedDataParallel as DDP

    gpt, model, batches = _setup(world, steps=2)
    ref = copy.deepcopy(model).to("tpu")
    ddp = DDP(copy.deepcopy(model).to("tpu"), bucket_cap_mb=0.05)  # several buckets
    opt, ref_opt = gpt.make_optimizer(ddp.module), gpt.make_optimizer(ref)
    for x, y in batches:
        _, loss = ddp(x.chunk(world)[rank].to("tpu"), y.chunk(world)[rank].to("tpu"))
        opt.zero_grad()
        loss.backward()
        opt.step()
        _, ref_loss = ref(x.to("tpu"), y.to("tpu"))
        ref_opt.zero_grad()
        ref_loss.backward()
        ref_opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        torch.testing.assert_close(mean.cpu(), ref_loss.detach().cpu(), atol=1e-5, rtol=1e-5)
    _assert_params_equal(ddp.module.named_parameters(), ref.parameters())


def test_ddp_gpt_equals_single_process():
    spawn(_ddp, 2)


def _fsdp(rank, world, mode):
    import torch_tpu

    with torch_tpu.eager_mode(torch_tpu.EagerMode[mode]):
        _fsdp_steps(rank, world)


def _fsdp_steps(rank, world):
    from torch.distributed.fsdp import fully_shard

    gpt, model, batches = _setup(world, steps=2, layers=1)
    ref = copy.deepcopy(model).to("tpu")
    sharded = copy.deepcopy(model).to("tpu")
    for blk in sharded.blocks:
        fully_shard(blk)
    fully_shard(sharded)
    assert all(p.to_local().shape[0] <= (p.shape[0] + 1) // world for p in sharded.parameters())
    opt = torch.optim.AdamW(sharded.parameters(), lr=1e-3)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-3)
    for x, y in batches:
        _, loss = sharded(x.chunk(world)[rank].to("tpu"), y.chunk(world)[rank].to("tpu"))
        opt.zero_grad()
        loss.backward()
        opt.step()
        _, ref_loss = ref(x.to("tpu"), y.to("tpu"))
        ref_opt.zero_grad()
        ref_loss.backward()
        ref_opt.step()
    _assert_params_equal(sharded.named_parameters(), ref.parameters())

    # mixed precision: bf16 parameters all-gathered (bytes moved as uint8), fp32 gradients
    # reduce-scattered; the gradients equal the fp32 unsharded ones to bf16 accuracy
    from torch.distributed.fsdp import MixedPrecisionPolicy

    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    mixed = copy.deepcopy(model).to("tpu")
    for blk in mixed.blocks:
        fully_shard(blk, mp_policy=policy)
    fully_shard(mixed, mp_policy=policy)
    ref = copy.deepcopy(model).to("tpu")
    x, y = batches[0]
    mixed(x.chunk(world)[rank].to("tpu"), y.chunk(world)[rank].to("tpu"))[1].backward()
    ref(x.to("tpu"), y.to("tpu"))[1].backward()
    for (name, p), q in zip(mixed.named_parameters(), ref.parameters()):
        g, r = p.grad.full_tensor().cpu(), q.grad.cpu()
        assert p.grad.dtype == torch.float32
        err = ((g - r).abs().max() / r.abs().max()).item()
        assert err < 3e-2, f"{name}: relative error {err}"


@pytest.mark.parametrize("mode", ["DEFER_NEVER", pytest.param("DEFER_AND_FUSE", marks=pytest.mark.dist_full)])
def test_fsdp2_fully_shard_step_equals_unsharded(mode):
    spawn(_fsdp, 2, mode)


def test_storage_resize_flushes_the_fused_window():
    """FSDP2 frees and re-allocates parameters with untyped_storage().resize_: ops still
    recorded in the fused window that read the storage run before it changes."""
    import torch_tpu

    with torch_tpu.eager_mode(torch_tpu.EagerMode.DEFER_AND_FUSE):
        a = torch.arange(6.0, device="tpu")
        x = a * 2
        y = x + 1  # recorded, reads x's storage
        x.untyped_storage().resize_(0)
        assert y.cpu().tolist() == [1.0, 3.0, 5.0, 7.0, 9.0, 11.0]
        x.untyped_storage().resize_(6 * 4)  # re-allocated (contents unspecified), writable
        x.copy_(a)
        assert (x + 0).cpu().tolist() == a.cpu().tolist()


def _dtensor(rank, world):
    import torch_tpu
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("tpu", (world,))
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(8, 12, generator=g), torch.randn(12, 4, generator=g)
    with torch_tpu.precision(torch_tpu.Precision.HIGHEST):
        da = distribute_tensor(a.to("tpu"), mesh, [Shard(0)])
        assert da.to_local().shape == (8 // world, 12) and da.to_local().device.type == "tpu"
        torch.testing.assert_close(da.to_local().cpu(), a.chunk(world)[rank])
        rep = da.redistribute(mesh, [Replicate()])
        torch.testing.assert_close(rep.to_local().cpu(), a)
        col = rep.redistribute(mesh, [Shard(1)])
        torch.testing.assert_close(col.to_local().cpu(), a.chunk(world, dim=1)[rank])
        row = col.redistribute(mesh, [Shard(0)])  # Shard(1) -> Shard(0): all_to_all
        torch.testing.assert_close(row.to_local().cpu(), a.chunk(world)[rank])
        db = distribute_tensor(b.to("tpu"), mesh, [Shard(0)])
        out = col @ db  # both sharded on the contracted dim: a Partial sum
        assert out.placements == (Partial(),)
        torch.testing.assert_close(out.full_tensor().cpu(), a @ b, atol=1e-5, rtol=1e-5)
        out = da @ distribute_tensor(b.to("tpu"), mesh, [Replicate()])
        assert out.placements == (Shard(0),)
        torch.testing.assert_close(out.full_tensor().cpu(), a @ b, atol=1e-5, rtol=1e-5)
    if world == 4:  # a 2 x 2 mesh: shard rows over one dim, columns over the other
        mesh2 = init_device_mesh("tpu", (2, 2), mesh_dim_names=("dp", "tp"))
        d2 = distribute_tensor(a.to("tpu"), mesh2, [Shard(0), Shard(1)])
        assert d2.to_local().shape == (4, 6)
        torch.testing.assert_close(d2.full_tensor().cpu(), a)
        torch.testing.assert_close(d2.redistribute(mesh2, [Replicate(), Shard(0)]).to_local().cpu(),
                                   a.chunk(2, dim=0)[rank % 2])


@pytest.mark.parametrize("world", [2, pytest.param(4, marks=pytest.mark.dist_full)])
def test_dtensor(world):
    spawn(_dtensor, world)


def _functional(rank, world):
    import torch.distributed._functional_collectives as fc

    from torch_tpu._internal import compile as tpu_compile

    group = dist.group.WORLD
    x = torch.arange(6.0, device="tpu") * (rank + 1)
    total = sum(r + 1 for r in range(world))
    base = torch.arange(6.0)
    torch.testing.assert_close(fc.all_reduce(x, "sum", group).cpu(), base * total)
    torch.testing.assert_close(fc.all_gather_tensor(x, 0, group).cpu(),
                               torch.cat([base * (r + 1) for r in range(world)]))
    torch.testing.assert_close(fc.reduce_scatter_tensor(x, "sum", 0, group).cpu(),
                               (base * total).chunk(world)[rank])

    def step(v):
        y = fc.all_reduce(v * 2, "sum", group)
        return y + 1, fc.all_gather_tensor(y, 0, group)

    compiled = torch.compile(step, backend="tpu")
    for k in range(3):  # new inputs each call: nothing stale is replayed
        v = x + k
        got, want = compiled(v), step(v)
        for g, w in zip(got, want):
            torch.testing.assert_close(g.cpu(), w.cpu())
    s = tpu_compile.stats()
    # one Dynamo graph holds the collectives (no graph break); their host staging is a sync
    # point, so the backend runs that graph eagerly instead of replaying a capture
    assert s["graphs"] + s["disk_loads"] == 1 and s["replays"] == 0, s


def test_functional_collectives_eager_and_compiled():
    spawn(_functional, 2)


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.dist_full
def test_torchrun_ddp_example():
    """torchrun's launcher (torch.distributed.run) through torch_tpu.distributed.run, which only
    lets its rendezvous store run on this PyTorch build without libuv."""
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch_tpu.distributed.run", "--nproc-per-node", "2",
           "--master-addr", "127.0.0.1", "--master-port", str(_free_port()),
           str(ROOT / "examples" / "ddp_gpt.py"), "--steps", "3", "--layers", "1", "--width", "32", "--ctx", "16"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert "ddp_gpt: 2 ranks" in r.stdout and "weights identical" in r.stdout, r.stdout
