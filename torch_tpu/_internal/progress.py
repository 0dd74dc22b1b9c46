"""Progress bars for the long runners (OpInfo, model coverage, benchmarks): tqdm on stderr.

A bar shows only when stderr is a terminal, tqdm is importable (Debian's python3-tqdm in the
environment) and TORCH_TPU_PROGRESS is not "0"; a runner's own flag (`--quiet`,
`--no-progress`) turns it off too. Logs and CI output therefore never carry bar redraws."""
import os
import sys


def enabled(flag=True, file=None):
    """Whether a bar would be drawn on `file` (default stderr)."""
    file = sys.stderr if file is None else file
    if not flag or os.environ.get("TORCH_TPU_PROGRESS", "1") == "0":
        return False
    try:
        import tqdm  # noqa: F401
    except ImportError:
        return False
    isatty = getattr(file, "isatty", None)
    return bool(isatty and isatty())


class _Null:
    def update(self, n=1):
        pass

    def set_postfix_str(self, s="", refresh=True):
        pass

    def set_description_str(self, s="", refresh=True):
        pass

    def close(self):
        pass


def _size(file):
    """(columns, rows) of the terminal, defaulted when it reports none: a pty nobody sized
    says 0 x 0, and tqdm then draws nothing."""
    try:
        cols, rows = os.get_terminal_size(file.fileno())
    except (AttributeError, OSError, ValueError):
        cols, rows = 0, 0
    return (cols if cols >= 40 else 100), (rows if rows >= 2 else 20)


def bar(total, desc, flag=True, file=None):
    """A tqdm bar of `total` steps (update/set_postfix_str/close), or a no-op stand-in."""
    file = sys.stderr if file is None else file
    if not enabled(flag, file):
        return _Null()
    from tqdm import tqdm

    cols, rows = _size(file)
    return tqdm(total=total, desc=desc, file=file, ncols=cols, nrows=rows, leave=False,
                bar_format="{desc} {n_fmt}/{total_fmt} |{bar:20}| {elapsed}<{remaining} {postfix}")


def wrap(iterable, desc, total=None, flag=True, file=None):
    """Iterates `iterable`, advancing a bar per item when one is drawn."""
    total = len(iterable) if total is None and hasattr(iterable, "__len__") else total
    b = bar(total, desc, flag, file)
    try:
        for item in iterable:
            yield item
            b.update(1)
    finally:
        b.close()
