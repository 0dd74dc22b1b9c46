"""TorchRec 1.9.2 with fbgemm-gpu-cpu 1.9.0 (`make torchrec`) on tpu: KeyedJaggedTensor ops
(permute, to_dict, offsets; fbgemm's jagged operators through torch_tpu/_internal/fbgemm.py),
EmbeddingBagCollection and EmbeddingCollection forward and backward, and a tiny DLRM training
step, against the same on CPU. Skipped without the site."""
import copy
import warnings

import pytest
import torch

import torch_tpu
from torch_tpu._internal import sites

try:
    sites.add("torchrec", "torchrec")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torchrec.models.dlrm import DLRM
        from torchrec.modules.embedding_configs import EmbeddingBagConfig, EmbeddingConfig
        from torchrec.modules.embedding_modules import EmbeddingBagCollection, EmbeddingCollection
        from torchrec.sparse.jagged_tensor import KeyedJaggedTensor
except ImportError as e:  # noqa: F841
    pytest.skip(f"TorchRec not installed: {e}", allow_module_level=True)

VALUES = torch.tensor([1, 2, 3, 4, 5, 6, 7, 8, 0, 9])
LENGTHS = torch.tensor([2, 0, 1, 3, 1, 2, 0, 1])  # 4 features x batch 2


def _kjt(dev, weighted=False):
    w = torch.linspace(0.5, 2.0, len(VALUES)).to(dev) if weighted else None
    return KeyedJaggedTensor.from_lengths_sync(keys=["f1", "f2", "f3", "f4"], values=VALUES.to(dev),
                                               lengths=LENGTHS.to(dev), weights=w)


@pytest.mark.parametrize("weighted", [False, True])
def test_kjt_ops_match_cpu(weighted):
    a, b = _kjt("cpu", weighted), _kjt("tpu", weighted)
    for order in ([1, 0, 3, 2], [3, 3, 0]):
        pa, pb = a.permute(order), b.permute(order)
        assert pb.keys() == pa.keys()
        assert torch.equal(pb.values().cpu(), pa.values()) and torch.equal(pb.lengths().cpu(), pa.lengths())
        if weighted:
            torch.testing.assert_close(pb.weights().cpu(), pa.weights())
    assert torch.equal(b.offsets().cpu(), a.offsets())
    da, db = a.to_dict(), b.to_dict()
    for k in da:
        assert torch.equal(db[k].values().cpu(), da[k].values()), k


def _tables():
    return [EmbeddingBagConfig(name="t1", embedding_dim=8, num_embeddings=20, feature_names=["f1", "f3"]),
            EmbeddingBagConfig(name="t2", embedding_dim=8, num_embeddings=30, feature_names=["f2", "f4"])]


@pytest.mark.parametrize("kind", ["bag", "sequence"])
def test_embedding_collections_forward_backward_match_cpu(kind):
    torch.manual_seed(0)
    if kind == "bag":
        ref = EmbeddingBagCollection(tables=_tables(), device=torch.device("cpu"))
        flat = lambda out: out.values()  # noqa: E731
    else:
        ref = EmbeddingCollection(tables=[EmbeddingConfig(name="t", embedding_dim=8, num_embeddings=20,
                                                          feature_names=["f1", "f2", "f3", "f4"])],
                                  device=torch.device("cpu"))
        flat = lambda out: torch.cat([out[k].values() for k in sorted(out)])  # noqa: E731
    dev = copy.deepcopy(ref).to("tpu")
    want = flat(ref(_kjt("cpu")))
    got = flat(dev(_kjt("tpu")))
    torch.testing.assert_close(got.cpu(), want)
    w = torch.randn(want.shape, generator=torch.Generator().manual_seed(1))
    (want * w).sum().backward()
    (got * w.to("tpu")).sum().backward()
    for (n, p), (_, q) in zip(dev.named_parameters(), ref.named_parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, msg=n)


def test_dlrm_training_step_matches_cpu():
    torch.manual_seed(0)
    ebc = EmbeddingBagCollection(tables=_tables(), device=torch.device("cpu"))
    model = DLRM(embedding_bag_collection=ebc, dense_in_features=4, dense_arch_layer_sizes=[16, 8],
                 over_arch_layer_sizes=[16, 1])
    g = torch.Generator().manual_seed(2)
    dense, labels = torch.randn(2, 4, generator=g), torch.tensor([1.0, 0.0])
    losses = {}
    for dev in ("cpu", "tpu"):
        m = copy.deepcopy(model).to(dev)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        out = []
        with torch_tpu.precision("highest"):
            for _ in range(3):
                logits = m(dense.to(dev), _kjt(dev)).squeeze(-1)
                loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels.to(dev))
                opt.zero_grad()
                loss.backward()
                opt.step()
                out.append(loss.item())
        losses[dev] = out
    torch.testing.assert_close(losses["tpu"], losses["cpu"], rtol=1e-5, atol=1e-6)
