"""DataLoader workers that return tpu tensors (issue 21, item 4): never a hang. Under spawn and
forkserver the batches arrive on tpu (sent as CPU copies); under fork, after the parent used
tpu, the workers' first tpu op raises and the DataLoader re-raises it in the parent, as CUDA's.
Every DataLoader has a timeout, so a hang fails the test instead of CI."""
import pytest
import torch

import torch_tpu
from torch_tpu import EagerMode

TIMEOUT = 90


@pytest.fixture(params=list(EagerMode), ids=lambda m: m.name)
def mode(request):
    with torch_tpu.eager_mode(request.param):
        yield request.param


class TpuDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.full((3,), float(i), device="tpu") * 2


_MODE_ENV = {EagerMode.DEFER_AND_FUSE: {"TORCH_TPU_DEFER_AND_FUSE": "1"},
             EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING: {"TORCH_TPU_LAUNCH_BLOCKING": "1"},
             EagerMode.DEFER_NEVER: {}}


def _check_batches(batches):
    assert [b.device.type for b in batches] == ["tpu", "tpu"]
    want = (torch.arange(8.0) * 2).repeat_interleave(3).reshape(8, 3)
    assert torch.equal(torch.cat([b.cpu() for b in batches]), want)


def test_spawn_workers_return_tpu_tensors(mode, monkeypatch):
    """The workers run in `mode` too: a spawned process reads its mode from the environment."""
    monkeypatch.delenv("TORCH_TPU_DEFER_AND_FUSE", raising=False)
    monkeypatch.delenv("TORCH_TPU_LAUNCH_BLOCKING", raising=False)
    for k, v in _MODE_ENV[mode].items():
        monkeypatch.setenv(k, v)
    workers = 2 if mode is EagerMode.DEFER_NEVER else 1  # each spawned worker imports torch: keep it short
    dl = torch.utils.data.DataLoader(TpuDataset(), batch_size=4, num_workers=workers, multiprocessing_context="spawn",
                                     timeout=TIMEOUT)
    _check_batches(list(dl))


def test_forkserver_workers_return_tpu_tensors():
    dl = torch.utils.data.DataLoader(TpuDataset(), batch_size=4, num_workers=2, multiprocessing_context="forkserver",
                                     timeout=TIMEOUT)
    _check_batches(list(dl))


def test_dataloader_fork_after_tpu_use_raises(mode):
    torch.ones(2, device="tpu").add(1).cpu()  # the parent's streams run
    dl = torch.utils.data.DataLoader(TpuDataset(), batch_size=4, num_workers=2, multiprocessing_context="fork",
                                     timeout=TIMEOUT)
    with pytest.raises(RuntimeError, match="forked subprocess.*spawn"):
        list(dl)
