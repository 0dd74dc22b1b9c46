"""The runtime axis of the Python suite. Under TORCH_TPU_RUNTIME=pjrt the tests listed in
pjrt_expected_failures.txt (node id, a tab, the reason) are marked xfail(strict=True): each
must still fail, so the list only shrinks (a listed test that starts passing fails until its
line is removed). Regenerate with tools/pjrt-expected (reads a pytest log)."""
import os
import pathlib

import pytest

_LIST = pathlib.Path(__file__).with_name("pjrt_expected_failures.txt")


def _expected():
    out = {}
    if not _LIST.exists():
        return out
    for line in _LIST.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        nodeid, _, reason = line.partition("\t")
        out[nodeid.strip()] = reason.strip() or "expected to fail on pjrt"
    return out


def pytest_configure(config):
    config.addinivalue_line("markers", "dist_full: a heavier distributed test (more processes, "
                            "timeouts, torchrun): skipped unless TORCH_TPU_DIST_FULL=1 (`make test-dist`)")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("TORCH_TPU_DIST_FULL") != "1":
        skip = pytest.mark.skip(reason="heavier distributed test: TORCH_TPU_DIST_FULL=1 or `make test-dist`")
        for item in items:
            if "dist_full" in item.keywords:
                item.add_marker(skip)
    if os.environ.get("TORCH_TPU_RUNTIME") != "pjrt":
        return
    expected = _expected()
    for item in items:
        reason = expected.get(item.nodeid)
        if reason:
            item.add_marker(pytest.mark.xfail(strict=True, reason=reason))
