"""The environment's site directories of pinned wheels (tools/wheel-site: jax-site, titan-site,
diffusers-site, ...), put on sys.path by the code that needs them."""
import os
import sys

ROOT = "/usr/local/lib/torch_tpu"


def path(name: str) -> str:
    return os.path.join(ROOT, f"{name}-site")


def add(name: str, make_target: str, replaces: tuple = ()) -> str:
    """Puts `name`-site first on sys.path; `replaces`: top-level packages it pins newer than the
    system's (forgotten if already imported, so the next import takes the site's). Raises
    ImportError naming the make target when the site is not installed."""
    site = path(name)
    if not os.path.isdir(site):
        raise ImportError(f"[torch_tpu] {name} is not installed; expected {site} (run `make {make_target}`)")
    if site not in sys.path:
        sys.path.insert(0, site)
    for pkg in replaces:
        for mod in [m for m in sys.modules if m == pkg or m.startswith(pkg + ".")]:
            del sys.modules[mod]
    return site
