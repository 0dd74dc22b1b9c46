"""Printing tpu tensors: a sync point. The values are copied to the host and formatted there
(PyTorch's formatter runs data-dependent ops such as masked_select); the surrounding repr
(device, dtype, grad_fn) still comes from the tpu tensor."""
import torch
import torch._tensor_str as _ts

_orig_tensor_str = _ts._tensor_str


def _tensor_str(self, indent):
    if self.device.type == "tpu":
        self = self.detach().to("cpu")
    return _orig_tensor_str(self, indent)


def install() -> None:
    if _ts._tensor_str is not _tensor_str:
        _ts._tensor_str = _tensor_str
