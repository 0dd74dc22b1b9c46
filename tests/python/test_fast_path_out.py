"""out= ops that resize their output (arange's composite passes an empty tensor; a user's
`out=torch.empty(0)`) replay from the per-op fast path (fast_path.cpp): the entry records the
sizes the lowering resized `out` to and replay resizes alike, so the second call of a
signature records nothing new and the result matches CPU in shape and values."""
import pytest
import torch

import torch_tpu
from torch_tpu import EagerMode

MODES = [EagerMode.DEFER_NEVER, EagerMode.DEFER_AND_FUSE]


def _entries():
    return torch_tpu.metrics()["fast_path"]["entries"]


CASES = {
    "arange": lambda dev, k: torch.arange(3, 20 + k, 2, device=dev),
    "arange_float": lambda dev, k: torch.arange(0.5, 7.5 + k, 0.25, device=dev),
    "cat_empty_out": lambda dev, k: torch.cat([torch.ones(2, k, device=dev), torch.zeros(2, 3, device=dev)], 1,
                                              out=torch.empty(0, device=dev)),
    "sum_empty_out": lambda dev, k: torch.sum(torch.arange(12 + k, device=dev, dtype=torch.float32).view(-1, 1), 1,
                                              out=torch.empty(0, device=dev)),
}


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("name", list(CASES))
def test_resized_out_replays(name, mode):
    fn = CASES[name]
    k = 10 * list(CASES).index(name) + 3 * MODES.index(mode)  # shapes of its own: entries are per process
    want = fn("cpu", k)
    with torch_tpu.eager_mode(mode):
        fn("tpu", k + 50)  # the ops making the inputs record their entries
        before = _entries()
        first = fn("tpu", k).cpu()
        recorded = _entries()
        assert recorded > before  # the resizing op recorded an entry
        again = [fn("tpu", k).cpu() for _ in range(3)]
        assert _entries() == recorded  # replayed, not recorded again
    for got in [first] + again:
        assert got.shape == want.shape and got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    # another size: its own entry, its own result shape
    with torch_tpu.eager_mode(mode):
        other = fn("tpu", k + 1).cpu()
    assert other.shape == fn("cpu", k + 1).shape
    torch.testing.assert_close(other, fn("cpu", k + 1), rtol=0, atol=0)
