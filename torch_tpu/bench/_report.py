"""Benchmark rows and the report of `python -m torch_tpu.bench all`: a text table, a markdown
table and a PNG bar chart (matplotlib) of ours vs PyTorch CPU.

Each benchmark's main(argv) returns a list of Row (its headline figures) after printing its
own output; `all` collects them."""
import dataclasses
import math
import os
from typing import List, Optional


@dataclasses.dataclass
class Row:
    """One headline figure. `ours` and `pytorch` in `unit`; `higher_is_better` for rates
    (GFLOP/s, tokens/s), else times or counts. `goal`: the least speedup wanted (ratio >=
    goal), or for a row without a PyTorch figure the most `ours` may be (counts: 0)."""
    bench: str
    name: str
    ours: float
    pytorch: Optional[float] = None
    unit: str = "ms"
    higher_is_better: bool = False
    goal: Optional[float] = None
    note: str = ""

    @property
    def ratio(self) -> Optional[float]:
        """How many times faster ours is than PyTorch CPU (> 1: ours faster)."""
        if self.pytorch is None or not self.ours or not self.pytorch or math.isnan(self.ours) or math.isnan(self.pytorch):
            return None
        return self.ours / self.pytorch if self.higher_is_better else self.pytorch / self.ours

    @property
    def met(self) -> Optional[bool]:
        if self.goal is None:
            return None
        if self.pytorch is None:
            return self.ours <= self.goal
        r = self.ratio
        return None if r is None else r >= self.goal

    def goal_text(self) -> str:
        if self.goal is None:
            return ""
        return f"<= {self.goal:.3g}" if self.pytorch is None else f">= {self.goal:.2f}x"


def _num(v: Optional[float]) -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    if float(v).is_integer() and abs(v) < 1e6:
        return f"{int(v)}"
    return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"


_COLUMNS = ("benchmark", "ours", "PyTorch CPU", "unit", "ratio", "goal", "met")


def _cells(r: Row) -> List[str]:
    ratio = r.ratio
    met = {True: "yes", False: "NO", None: ""}[r.met]
    return [f"{r.bench}: {r.name}", _num(r.ours), _num(r.pytorch), r.unit,
            "-" if ratio is None else f"{ratio:.2f}x", r.goal_text(), met]


LEGEND = ("ratio: how many times faster ours is than PyTorch CPU, measured in the same run (> 1: ours "
          "faster; PyTorch time / ours, or ours rate / PyTorch's); goal: the least ratio wanted, or for "
          "a count the most allowed")


def format_table(rows: List[Row]) -> str:
    """A plain-text table (one line per row) with the legend under it."""
    cells = [list(_COLUMNS)] + [_cells(r) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(_COLUMNS))]
    lines = []
    for k, c in enumerate(cells):
        lines.append("  ".join([c[0].ljust(widths[0])] + [c[i].rjust(widths[i]) for i in range(1, len(c))]))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append(LEGEND)
    return "\n".join(lines)


def markdown(rows: List[Row], title: str = "torch_tpu vs PyTorch CPU", meta: str = "") -> str:
    out = [f"# {title}", ""] + ([meta, ""] if meta else []) + ["| " + " | ".join(_COLUMNS) + " |", "|" + "---|" * len(_COLUMNS)]
    for r in rows:
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in _cells(r)) + " |")
    out += ["", LEGEND + ".", ""]
    notes = [f"- {r.bench}: {r.name}: {r.note}" for r in rows if r.note]
    if notes:
        out += ["Notes:", ""] + notes + [""]
    return "\n".join(out)


def bar_chart(path: str, rows: List[Row], title: str = "torch_tpu vs PyTorch CPU (ratio > 1: ours faster)"):
    """A horizontal bar per row that has a ratio (log scale, a line at 1x; a tick at the goal);
    rows without one (counts) are listed under the chart."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    bars = [r for r in rows if r.ratio is not None]
    others = [r for r in rows if r.ratio is None]
    height = 1.2 + 0.32 * max(len(bars), 1) + 0.22 * len(others)
    fig, ax = plt.subplots(figsize=(10, height))
    labels = [f"{r.bench}: {r.name}" for r in bars]
    ratios = [r.ratio for r in bars]
    colors = ["#2ca02c" if r.met or (r.met is None and r.ratio >= 1) else "#d62728" for r in bars]
    y = list(range(len(bars)))[::-1]
    ax.barh(y, ratios, color=colors)
    for yi, r in zip(y, bars):
        ax.text(r.ratio, yi, f" {r.ratio:.2f}x", va="center", fontsize=8)
        if r.goal is not None:
            ax.plot([r.goal, r.goal], [yi - 0.4, yi + 0.4], color="black", linewidth=1)
    ax.axvline(1.0, color="gray", linestyle="--", linewidth=1)
    ax.set_yticks(y, labels, fontsize=8)
    if ratios:
        ax.set_xscale("log")
        lo, hi = min(ratios + [0.5]) / 1.5, max(ratios + [2.0]) * 2.0
        ax.set_xlim(lo, hi)
        ticks = [t for t in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100) if lo <= t <= hi]
        ax.set_xticks(ticks, [f"{t:g}x" for t in ticks])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("ratio vs PyTorch CPU (log scale; black tick: goal)")
    ax.set_title(title, fontsize=10)
    if others:
        text = "\n".join(f"{r.bench}: {r.name}: {_num(r.ours)} {r.unit}"
                         + (f" (goal {r.goal_text()}: {'met' if r.met else 'NOT met'})" if r.goal is not None else "")
                         for r in others)
        ax.annotate(text, xy=(0, 0), xycoords="axes fraction", xytext=(0, -36), textcoords="offset points",
                    fontsize=8, va="top", family="monospace")
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def write(out_dir: str, rows: List[Row], name: str = "all", meta: str = ""):
    """Writes OUT_DIR/NAME.md (with the line `meta` under its title) and OUT_DIR/NAME.png;
    returns their paths."""
    os.makedirs(out_dir, exist_ok=True)
    md, png = os.path.join(out_dir, f"{name}.md"), os.path.join(out_dir, f"{name}.png")
    with open(md, "w") as f:
        f.write(markdown(rows, meta=meta))
    bar_chart(png, rows)
    return md, png
