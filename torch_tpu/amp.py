"""torch.tpu.amp: torch.cuda.amp's names for device "tpu" (autocast, GradScaler, custom_fwd,
custom_bwd), so `torch.cuda.amp.X` becomes `torch.tpu.amp.X`. Prefer torch.autocast("tpu")
and torch.amp.GradScaler("tpu"), which these forward to.
"""
import functools

import torch

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


class autocast(torch.amp.autocast):
    """torch.autocast("tpu", ...). The default dtype is torch.get_autocast_dtype("tpu")
    (bfloat16, the tpu's native half type)."""

    def __init__(self, enabled: bool = True, dtype=None, cache_enabled: bool = True):
        super().__init__("tpu", dtype=dtype or torch.get_autocast_dtype("tpu"), enabled=enabled,
                         cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """torch.amp.GradScaler("tpu", ...)."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True):
        super().__init__("tpu", init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)


custom_fwd = functools.partial(torch.amp.custom_fwd, device_type="tpu")
custom_bwd = functools.partial(torch.amp.custom_bwd, device_type="tpu")
