"""torch_tpu internals (TorchTPU-compatible module paths)."""
