"""Plots of sweep results for the HTML report, each returned as PNG bytes (None if no rows fit).

Rows are the dicts of `arsched.experiments.read_rows` (strings from the CSV). Runs of one config
topology spec over several seeds (Jellyfish) are drawn as their mean with a min-max bar. Cluster
runs are drawn with `arsched.viz.cluster`, from the JCTs and utilisation series in their rows.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from arsched.viz.plots import png_bytes, pyplot

Rows = Sequence[dict[str, str]]


def finished(rows: Rows) -> list[dict[str, str]]:
    """Rows of runs that applied and produced a finite time."""
    return [r for r in rows if not r["note"] and r["gap"] and math.isfinite(float(r["gap"]))]


def in_model(rows: Rows, model: str) -> list[dict[str, str]]:
    """Finished rows of `model` as simulated by default: the flow model with in-order
    connections (rows with `fifo` off are the all-at-once variant, shown only where asked)."""
    fifo = "True" if model == "flow" else "False"
    return [r for r in finished(rows) if r["model"] == model and r["fifo"] == fifo]


def topology_title(rows: Rows) -> str:
    """A topology group's title: its name, or its spec and the number of seeds."""
    names = sorted({r["topology_name"] for r in rows})
    return names[0] if len(names) == 1 else f"{rows[0]['spec']} ({len(names)} seeds)"


def by_spec(rows: Rows) -> dict[str, list[dict[str, str]]]:
    """Rows grouped by topology spec, families in alphabetical order, smaller networks first
    (rows arrive in the order tasks finished, which varies from run to run)."""
    groups: dict[str, list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        groups[r["spec"]].append(r)
    return dict(sorted(groups.items(), key=lambda kv: (kv[0].split(":")[0], int(kv[1][0]["ranks"]), kv[0])))


def labels_of(rows: Rows) -> list[str]:
    """The algorithm labels in the registry's order (baselines first), then by name."""
    from arsched.algorithms.registry import ORDER

    rank = {name: i for i, name in enumerate(ORDER)}
    pairs = {(r["label"], r["algorithm"]) for r in rows}
    return [lab for lab, alg in sorted(pairs, key=lambda p: (rank.get(p[1], len(ORDER)), p[0]))]


def _spread(values: list[float]) -> tuple[float, float, float]:
    """(mean, mean - min, max - mean), the last two never below 0 (rounding)."""
    a = np.asarray(values, dtype=float)
    m = float(a.mean())
    return m, max(0.0, m - float(a.min())), max(0.0, float(a.max()) - m)


def _panels(n: int, width: float = 5.4, height: float = 3.6):
    plt = pyplot()
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis("off")
    return fig, list(axes.flat[:n])


def _plain_log_ticks(ax) -> None:
    """Log-scale y ticks as plain numbers (2, 3, 4) rather than 2×10⁰; minor ones labelled only
    when the axis spans less than a decade (call after plotting)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    fmt = FuncFormatter(lambda v, _: f"{v:g}")
    lo, hi = ax.get_ylim()
    ax.yaxis.set_major_formatter(fmt)
    ax.yaxis.set_minor_formatter(fmt if hi < 10 * lo else NullFormatter())


def size_label(nbytes: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes:g} B"


def gap_bars(rows: Rows, model: str = "flow") -> bytes | None:
    """Per topology: the gap to the lower bound of every algorithm (groups) at every size (bars)."""
    fig = gap_figure(rows, model)
    return None if fig is None else png_bytes(fig)


def gap_figure(rows: Rows, model: str = "flow"):
    """The figure of `gap_bars` (None if no rows fit), for a caller that adds to it."""
    rows = in_model(rows, model)
    if not rows:
        return None
    groups = by_spec(rows)
    fig, axes = _panels(len(groups))
    for ax, group in zip(axes, groups.values(), strict=True):
        labels = labels_of(group)
        sizes = sorted({float(r["bytes"]) for r in group})
        gaps: dict[tuple[str, float], list[float]] = defaultdict(list)
        for r in group:
            gaps[(r["label"], float(r["bytes"]))].append(float(r["gap"]))
        width = 0.8 / len(sizes)
        for k, size in enumerate(sizes):
            stats = [_spread(gaps[(lab, size)]) if gaps[(lab, size)] else (np.nan, 0, 0) for lab in labels]
            ax.bar(
                np.arange(len(labels)) + k * width,
                [s[0] for s in stats],
                width,
                yerr=np.array([[s[1] for s in stats], [s[2] for s in stats]]),
                label=size_label(size),
                capsize=2,
            )
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(np.arange(len(labels)) + width * (len(sizes) - 1) / 2, labels, rotation=35, ha="right")
        ax.set_yscale("log")
        _plain_log_ticks(ax)
        ax.set_title(topology_title(group), fontsize=10)
        ax.set_ylabel("time / lower bound")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"Gap to the lower bound ({model} model; 1 is optimal)")
    fig.tight_layout()
    return fig


def time_vs_size(rows: Rows) -> bytes | None:
    """Per topology: flow-model time against message size for every algorithm, the bound dashed."""
    rows = in_model(rows, "flow")
    groups = {k: g for k, g in by_spec(rows).items() if len({r["bytes"] for r in g}) > 1}
    if not groups:
        return None
    fig, axes = _panels(len(groups))
    for ax, group in zip(axes, groups.values(), strict=True):
        for lab in labels_of(group):
            per: dict[float, list[float]] = defaultdict(list)
            for r in group:
                if r["label"] == lab:
                    per[float(r["bytes"])].append(float(r["time_s"]))
            xs = sorted(per)
            ax.plot(xs, [np.mean(per[x]) * 1e3 for x in xs], marker="o", markersize=3, label=lab)
        bound: dict[float, list[float]] = defaultdict(list)
        for r in group:
            bound[float(r["bytes"])].append(float(r["bound_s"]))
        xs = sorted(bound)
        ax.plot(xs, [np.mean(bound[x]) * 1e3 for x in xs], "k--", linewidth=1.5, label="lower bound")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes per rank)")
        ax.set_ylabel("time (ms)")
        ax.set_title(topology_title(group), fontsize=10)
    axes[0].legend(fontsize=7, ncol=2)
    fig.suptitle("AllReduce time against message size (flow model)")
    fig.tight_layout()
    return png_bytes(fig)


def rounds_vs_bound(rows: Rows) -> bytes | None:
    """Per topology, at the largest size: round-model rounds of every algorithm, and the lower
    bound expressed in rounds of that schedule's average length (black tick)."""
    rows = [r for r in finished(rows) if r["model"] == "rounds" and r["rounds"]]
    if not rows:
        return None
    groups = by_spec(rows)
    fig, axes = _panels(len(groups))
    for ax, group in zip(axes, groups.values(), strict=True):
        top = max(float(r["bytes"]) for r in group)
        group = [r for r in group if float(r["bytes"]) == top]
        labels = labels_of(group)
        rounds = [_spread([float(r["rounds"]) for r in group if r["label"] == lab]) for lab in labels]
        bound = [np.mean([float(r["bound_rounds"]) for r in group if r["label"] == lab]) for lab in labels]
        xs = np.arange(len(labels))
        ax.bar(
            xs, [s[0] for s in rounds], 0.6, yerr=np.array([[s[1] for s in rounds], [s[2] for s in rounds]])
        )
        ax.scatter(xs, bound, marker="_", s=400, color="black", zorder=3, label="lower bound")
        ax.set_xticks(xs, labels, rotation=35, ha="right")
        ax.set_yscale("log")
        ax.set_ylabel("rounds")
        ax.set_title(f"{topology_title(group)}, {size_label(top)}", fontsize=10)
    axes[0].legend(fontsize=7)
    fig.suptitle("Round model: rounds beside the lower bound (in rounds of the schedule's length)")
    fig.tight_layout()
    return png_bytes(fig)


@dataclass
class ClusterRun:
    """A cluster row's series, shaped like arsched.cluster's ClusterResult for its plot helpers."""

    scheduler: str
    network: str
    jobs: int
    jct: np.ndarray
    slot_starts: np.ndarray
    utilization: np.ndarray

    @classmethod
    def of(cls, row: dict[str, str]) -> ClusterRun:
        util = json.loads(row["utilization"])
        jct = np.array([math.inf if j is None else j for j in json.loads(row["jct_s"])], dtype=float)
        return cls(
            row["scheduler"],
            row["network"],
            int(row["jobs"]),
            jct,
            np.array(util["t_s"]),
            np.array(util["u"]),
        )


def by_scheduler(rows: Rows) -> dict[tuple[str, str], list[dict[str, str]]]:
    """Cluster rows grouped by (scheduler, network mode), in the registry's order of schedulers
    and modes; each group's rows by seed."""
    from arsched.cluster.network import MODES
    from arsched.cluster.schedulers import SCHEDULERS

    rank = {name: i for i, name in enumerate(SCHEDULERS)}
    groups: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: (r["seed"] != "", int(r["seed"] or 0))):
        groups[(r["scheduler"], r["network"])].append(r)
    return dict(sorted(groups.items(), key=lambda kv: (rank.get(kv[0][0], len(rank)), MODES.index(kv[0][1]))))


def cluster_panels(rows: Rows) -> bytes | None:
    """Two panels: the JCT CDF and the GPU utilisation over time of every scheduler and network
    mode (of its first seed) on one trace and cluster."""
    from arsched.viz.cluster import draw_jct_cdf, draw_utilization

    if not rows:
        return None
    runs = [ClusterRun.of(group[0]) for group in by_scheduler(rows).values()]
    fig, (left, right) = _panels(2, width=6.5, height=4.2)
    draw_jct_cdf(left, runs)
    draw_utilization(right, runs)
    fig.tight_layout()
    return png_bytes(fig)
