"""Plots of cluster runs: JCT CDFs, GPU utilisation over time, total utility per scheduler."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from arsched.cluster import ClusterResult
from arsched.viz.plots import pyplot, save_figure


def _label(r: ClusterResult) -> str:
    return f"{r.scheduler} ({r.network})"


def _style(r: ClusterResult) -> dict:
    """One colour per scheduler, one line style per network mode, so that twelve runs stay apart."""
    from arsched.cluster.network import MODES
    from arsched.cluster.schedulers import SCHEDULERS

    names = list(SCHEDULERS)
    colour = f"C{names.index(r.scheduler) if r.scheduler in names else len(names)}"
    dashes = ("-", "--", ":")[MODES.index(r.network) if r.network in MODES else 0]
    return {"color": colour, "linestyle": dashes, "label": _label(r)}


def draw_jct_cdf(ax, results: Sequence[ClusterResult]) -> None:
    """The CDF of every run's JCTs (unfinished jobs never reach the top) on a log time axis.
    `results` may be any objects with scheduler, network, jobs and jct (the report's rows)."""
    for r in results:
        j = np.sort(r.jct[np.isfinite(r.jct)])
        ax.step(j, np.arange(1, len(j) + 1) / r.jobs, where="post", **_style(r))
    ax.set(xscale="log", xlabel="job completion time (s)", ylabel="fraction of jobs", title="JCT CDF")
    ax.legend(fontsize=7)


def draw_utilization(ax, results: Sequence[ClusterResult]) -> None:
    """Every run's busy fraction of the GPUs against time (slot_starts, utilization)."""
    for r in results:
        ax.plot(r.slot_starts / 3600, r.utilization, lw=0.8, **_style(r))
    ax.set(xlabel="time (h)", ylabel="GPU utilisation", ylim=(0, 1.05), title="GPU utilisation per slot")
    ax.legend(fontsize=7)


def plot_runs(results: Sequence[ClusterResult], folder: Path) -> list[Path]:
    """Write jct_cdf.png, utilization.png and utility.png into `folder`; return their paths."""
    plt = pyplot()
    paths = [folder / n for n in ("jct_cdf.png", "utilization.png", "utility.png")]
    for draw, path in ((draw_jct_cdf, paths[0]), (draw_utilization, paths[1])):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        draw(ax, results)
        save_figure(fig, path)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.bar(range(len(results)), [r.total_utility for r in results])
    ax.set_xticks(range(len(results)), [_label(r) for r in results], rotation=45, ha="right", fontsize=7)
    ax.set(ylabel=f"total utility ({results[0].objective})" if results else "", title="Total utility")
    save_figure(fig, paths[2])
    return paths
