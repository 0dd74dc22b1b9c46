"""python -m torch_tpu.bench NAME [args...]"""
import importlib
import pkgutil
import sys

import torch_tpu.bench as _pkg


def _names():
    return sorted(m.name for m in pkgutil.iter_modules(_pkg.__path__) if not m.name.startswith("_"))


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m torch_tpu.bench NAME [args]\nbenchmarks: " + ", ".join(_names()))
        return 0
    name = argv.pop(0)
    if name not in _names():
        print(f"[bench] unknown benchmark {name!r}; expected one of: {', '.join(_names())}", file=sys.stderr)
        return 2
    return importlib.import_module(f"torch_tpu.bench.{name}").main(argv) or 0


if __name__ == "__main__":
    sys.exit(main())
