"""Ops taking tensor lists (cat, stack, index.Tensor, index_put_) replay from the per-op fast
path (csrc/lowering/from_aten/fast_path.cpp): the first call of a signature records how the
graph binds each list element, later calls with other tensors of the same shapes launch it
without lowering. A replay must bind every element to its own tensor (aliasing inside a list
is part of the signature), keep None positions, record anew for new shapes or dtypes, and
leave lists it cannot replay (CPU tensors, boolean masks) to the lowering, in strict and
fused modes alike."""
import pytest
import torch

import torch_tpu
from torch_tpu import EagerMode

MODES = [EagerMode.DEFER_NEVER, EagerMode.DEFER_AND_FUSE]


def _entries():
    return torch_tpu.metrics()["fast_path"]["entries"]


def _rand(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# (name, fn(list of tensors)); each case uses shapes of its own (entries are per process).
CASES = {
    "cat": lambda ts: torch.cat(ts, dim=1),
    "cat_out": lambda ts: torch.cat(ts, dim=1, out=torch.empty(ts[0].shape[0], sum(t.shape[1] for t in ts),
                                                           dtype=ts[0].dtype, device=ts[0].device)),
    "stack": lambda ts: torch.stack(ts),
}


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("name", list(CASES))
def test_list_ops_replay_each_element(name, mode):
    fn = CASES[name]
    k = 3 + 2 * list(CASES).index(name) + MODES.index(mode)
    cpu = [_rand(2, k, seed=i) for i in range(4)]
    dev = [t.to("tpu") for t in cpu]
    with torch_tpu.eager_mode(mode):
        torch.testing.assert_close(fn(dev[:3]).cpu(), fn(cpu[:3]), rtol=0, atol=0)  # records
        recorded = _entries()
        # Other tensors, other orders, one tensor twice (another signature), all of the same shapes.
        for order in ([1, 2, 3], [3, 0, 1], [2, 2, 0], [0, 2, 2], [1, 1, 1], [3, 0, 1]):
            got = fn([dev[i] for i in order]).cpu()
            torch.testing.assert_close(got, fn([cpu[i] for i in order]), rtol=0, atol=0, msg=str(order))
        after = _entries()
        assert after > recorded  # the aliased lists recorded their own entries ...
        for order in ([2, 3, 1], [0, 0, 0], [1, 3, 3]):  # ... and replay from them
            torch.testing.assert_close(fn([dev[i] for i in order]).cpu(), fn([cpu[i] for i in order]), rtol=0, atol=0)
        assert _entries() == after
        # Another shape or dtype records a new entry and is right.
        wide = [_rand(2, k + 7, seed=9).to("tpu"), dev[0], dev[1]]
        torch.testing.assert_close(fn([wide[0][:, :k].contiguous(), dev[0], dev[1]]).cpu(),
                                   fn([wide[0][:, :k].contiguous().cpu(), cpu[0], cpu[1]]), rtol=0, atol=0)
        halves = [t.to(torch.bfloat16) for t in dev[:3]]
        torch.testing.assert_close(fn(halves).cpu(), fn([t.to(torch.bfloat16) for t in cpu[:3]]), rtol=0, atol=0)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_index_tensor_replays_with_none_positions(mode):
    k = 11 + MODES.index(mode)
    x = _rand(4, k, 5, seed=1)
    xd = x.to("tpu")
    with torch_tpu.eager_mode(mode):
        for rows in ([0, 2], [3, 1], [2, 2], [-1, 0]):
            i = torch.tensor(rows)
            torch.testing.assert_close(xd[:, i.to("tpu")].cpu(), x[:, i], rtol=0, atol=0)
            torch.testing.assert_close(xd[i.to("tpu")].cpu(), x[i], rtol=0, atol=0)
            torch.testing.assert_close(xd[i.to("tpu"), :, i.to("tpu") + 1].cpu(), x[i, :, i + 1], rtol=0, atol=0)
        before = _entries()
        for rows in ([1, 0], [3, 3]):
            i = torch.tensor(rows).to("tpu")
            xd[:, i]
            xd[i]
            xd[i, :, i + 1]
        torch.tpu.synchronize()
        assert _entries() == before
        # A boolean mask depends on the data (the lowering syncs for its size): never replayed.
        for m in ([True, False, True, True], [False, True, False, False]):
            mask = torch.tensor(m)
            torch.testing.assert_close(xd[mask.to("tpu")].cpu(), x[mask], rtol=0, atol=0)
        # An out-of-range index still raises from a replay.
        xd[torch.tensor([0, 4]).to("tpu")]
        with pytest.raises((IndexError, RuntimeError), match="out of"):
            torch.tpu.synchronize()


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_index_put_replays(mode):
    k = 21 + MODES.index(mode)
    with torch_tpu.eager_mode(mode):
        for rows, acc in (([0, 2], False), ([1, 3], False), ([2, 2], True), ([0, 0], True), ([3, 1], False)):
            x = _rand(4, k, seed=len(rows) + rows[0])
            v = _rand(2, k, seed=rows[1])
            i = torch.tensor(rows)
            xd = x.to("tpu")
            xd.index_put_((i.to("tpu"),), v.to("tpu"), accumulate=acc)
            x.index_put_((i,), v, accumulate=acc)
            torch.testing.assert_close(xd.cpu(), x)


def test_cpu_indices_index_a_tpu_tensor():
    """As with CUDA tensors, CPU index tensors (and masks) index a tpu tensor; such calls are
    lowered each time (the indices are copied to the device first), never replayed stale."""
    x = _rand(5, 3, seed=2)
    xd = x.to("tpu")
    for rows in ([0, 4], [3, 1], [2, 2]):
        i = torch.tensor(rows)
        torch.testing.assert_close(xd[i].cpu(), x[i], rtol=0, atol=0)
        torch.testing.assert_close(xd[:, i % 3].cpu(), x[:, i % 3], rtol=0, atol=0)
    mask = torch.tensor([True, False, True, False, True])
    torch.testing.assert_close(xd[mask].cpu(), x[mask], rtol=0, atol=0)
    y, yd = x.clone(), x.clone().to("tpu")
    y.index_put_((torch.tensor([1, 3]),), torch.ones(2, 3))
    yd.index_put_((torch.tensor([1, 3]),), torch.ones(2, 3).to("tpu"))
    torch.testing.assert_close(yd.cpu(), y, rtol=0, atol=0)
