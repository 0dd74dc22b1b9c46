"""tpu tensors through torch.multiprocessing (mp.Queue, DataLoader workers): sent as a CPU copy
and rebuilt on the same tpu device index by the receiver. A copy, not shared memory: writes in
one process are not seen by the other (CUDA shares through IPC handles; tpu memory has none).
Installed by `import torch_tpu` into torch's ForkingPickler, next to torch's own reductions.
"""
import torch
from torch.multiprocessing import reductions


def _rebuild_tpu_tensor(cpu, device_index, requires_grad, is_param):
    t = cpu.to(torch.device("tpu", device_index))
    if is_param:
        return torch.nn.Parameter(t, requires_grad=requires_grad)
    return t.requires_grad_(requires_grad) if requires_grad else t


def _rebuild_tpu_storage(cpu, device_index):
    return cpu.to(torch.device("tpu", device_index)).untyped_storage()


def _reduce_tensor(t):
    if t.device.type != "tpu":
        return reductions.reduce_tensor(t)
    if t.requires_grad and not t.is_leaf:
        raise RuntimeError("Cowardly refusing to serialize non-leaf tensor which requires_grad, "
                           "since autograd does not support crossing process boundaries.  "
                           "If you just want to transfer the data, call detach() on the tensor "
                           "before serializing (e.g., putting it on the queue).")
    cpu = t.detach().cpu()  # a sync point: the copy holds the values queued so far
    return _rebuild_tpu_tensor, (cpu, t.device.index or 0, t.requires_grad,
                                 isinstance(t, torch.nn.Parameter))


def _reduce_storage(s):
    if s.device.type != "tpu":
        return reductions.reduce_storage(s)
    cpu = torch.empty(0, dtype=torch.uint8, device=s.device).set_(s).cpu()
    return _rebuild_tpu_storage, (cpu, s.device.index or 0)


def install() -> None:
    from multiprocessing.reduction import ForkingPickler

    for cls in (torch.Tensor, torch.nn.parameter.Parameter):
        ForkingPickler.register(cls, _reduce_tensor)
    ForkingPickler.register(torch.UntypedStorage, _reduce_storage)
