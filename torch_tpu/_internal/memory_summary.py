"""torch.tpu.memory_summary: the allocator's stats in torch.cuda.memory_summary's table format."""


def _format_size(sz, pref_sz):
    prefix = "B  "
    for new_prefix in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        if pref_sz < 768 * 1024:
            break
        prefix = new_prefix
        sz //= 1024
        pref_sz /= 1024
    return f"{sz:6d} {prefix}"


def _format_count(cnt, pref_cnt):
    prefix = " "
    for new_prefix in ("K", "M"):
        if pref_cnt < 750 * 1000:
            break
        prefix = new_prefix
        cnt //= 1000
        pref_cnt /= 1000
    return f"{cnt:7d} {prefix} "


_METRICS = [
    ("allocated_bytes", "Allocated memory", _format_size),
    ("active_bytes", "Active memory", _format_size),
    ("requested_bytes", "Requested memory", _format_size),
    ("reserved_bytes", "TPU reserved memory", _format_size),
    ("inactive_split_bytes", "Non-releasable memory", _format_size),
    ("allocation", "Allocations", _format_count),
    ("active", "Active allocs", _format_count),
    ("segment", "TPU reserved segments", _format_count),
    ("inactive_split", "Non-releasable allocs", _format_count),
]


def format_summary(stats, device: int, abbreviated: bool = False) -> str:
    rule, heavy = "-" * 75, "=" * 75
    lines = [heavy, f" {'':16} PyTorch TPU memory summary, device ID {device:<18d} ", rule,
             f"  {'':9} TPU OOMs: {stats.get('num_ooms', 0):<13d} | {'':6} alloc retries: "
             f"{stats.get('num_alloc_retries', 0):<13d}  ",
             heavy, "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  "]
    for key, name, fmt in _METRICS:
        lines.append(rule)
        subs = [("all", name)]
        if not abbreviated:
            subs += [("large_pool", "      from large pool"), ("small_pool", "      from small pool")]
        pref = None
        for sub, label in subs:
            vals = [stats.get(f"{key}.{sub}.{f}", 0) for f in ("current", "peak", "allocated", "freed")]
            pref = pref or vals
            cells = " | ".join(fmt(v, p) for v, p in zip(vals, pref))
            lines.append(f" {label:<21} | {cells} ")
    lines.append(heavy)
    return "|" + "|\n|".join(lines) + "|\n"
