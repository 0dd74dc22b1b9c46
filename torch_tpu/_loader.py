"""The `torch.backends` autoload entry point (TorchTPU's name, `torch_tpu._loader:load`).

`import torch` calls `load()` once at its end for every installed distribution that declares
an entry point in the group `torch.backends` (unless `TORCH_DEVICE_BACKEND_AUTOLOAD=0`), so an
installed torch_tpu makes device "tpu" usable after `import torch` alone. Loading is importing
the package: its import registers PrivateUse1 as "tpu", `torch.tpu`, the Dynamo hooks and the
"tpu_dist" process group. When a script imports torch_tpu itself, torch's autoload runs while
the package is still initializing (its first line imports torch); `load()` then leaves the
rest to that import, so both orders end with one registration."""
import sys


def load() -> None:
    """Imports torch_tpu (idempotent; a no-op while the package itself is being imported)."""
    pkg = sys.modules.get("torch_tpu")
    if pkg is not None and not getattr(pkg, "_loaded", False):
        return  # `import torch_tpu` is on the stack: it finishes the registration itself
    import torch_tpu  # noqa: F401
