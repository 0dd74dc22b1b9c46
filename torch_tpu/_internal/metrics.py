"""torch_tpu.metrics() and metrics_report()."""
from torch_tpu import _C


def metrics() -> dict:
    """A snapshot: ops executed per mode, CPU fallbacks per op, bytes copied host<->device,
    compile cache counters and allocator stats."""
    m = _C._metrics()
    from torch_tpu._internal import decompositions

    m["decompositions"] = decompositions.counts()
    import sys

    comp = sys.modules.get("torch_tpu._internal.compile")
    if comp is not None:  # torch.compile used: its counters and one entry per graph
        from torch_tpu._internal import buckets

        m["compile"] = {**comp.stats(), "graphs": comp.graphs_report(), "bucketed": buckets.report()}
    dyn = sys.modules.get("torch_tpu._internal.dynamic_eager")
    if dyn is not None:  # torch_tpu.mark_dynamic used
        m["dynamic"] = dyn.stats()
    try:
        import torch
        m["memory"] = {
            "allocated_bytes": torch.tpu.memory_allocated(),
            "max_allocated_bytes": torch.tpu.max_memory_allocated(),
            "reserved_bytes": torch.tpu.memory_reserved(),
        }
    except Exception:  # device module not registered yet
        pass
    return m


def metrics_report() -> str:
    """A readable report of metrics(), returned (not printed), like torch's summaries:
    `print(torch_tpu.metrics_report())`."""
    m = metrics()
    lines = ["torch_tpu metrics"]

    def emit(d, indent=1):
        for k, v in d.items():
            if isinstance(v, dict):
                lines.append("  " * indent + f"{k}:")
                if not v:
                    lines.append("  " * (indent + 1) + "(none)")
                emit(v, indent + 1)
            else:
                lines.append("  " * indent + f"{k}: {v}")

    emit(m)
    return "\n".join(lines)
