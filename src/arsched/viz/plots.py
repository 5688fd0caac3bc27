"""Plots people would rather look at than read: a simulation's per-link utilisation over time
and a per-rank timeline of its transfers; a topology drawing. Written atomically as PNG."""

from __future__ import annotations

import io
import os

import numpy as np

from arsched.fileio import write_atomic
from arsched.sim.paths import compile_paths
from arsched.sim.result import SimResult
from arsched.topology.core import Topology

MAX_BARS = 20_000  # transfers drawn in the timeline; more are sampled evenly
MAX_LINKS = 200  # links shown in the heat map: the busiest ones
TIME_BINS = 200


def png_bytes(fig) -> bytes:
    """The figure as PNG bytes; the figure is closed."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def save_figure(fig, path: str | os.PathLike) -> None:
    """Write a figure as PNG, atomically (never a half-written file)."""
    write_atomic(path, png_bytes(fig))


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _rate_changes(result: SimResult, cp, row: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, time, rate change) for every change of a shown link's rate."""
    log = result.link_rate_trace
    if log:  # exact rates, piecewise constant until the next entry
        ends = [t for t, _, _ in log[1:]] + [result.time_s]
        links = np.concatenate([lk for _, lk, _ in log])
        rate = np.concatenate([r for _, _, r in log])
        t0 = np.concatenate([np.full(len(lk), t) for t, lk, _ in log])
        t1 = np.concatenate([np.full(len(lk), e) for (_, lk, _), e in zip(log, ends, strict=True)])
    else:  # each transfer sends evenly after α until one path latency before its end
        links = cp.links
        t0 = (result.start + result.alpha)[cp.owner]
        t1 = np.maximum((result.end - cp.latency)[cp.owner], t0 + 1e-300)
        rate = result.schedule.chunk_bytes / (t1 - t0)
    keep = row[links] >= 0
    return (
        np.concatenate([row[links][keep]] * 2),
        np.concatenate([t0[keep], t1[keep]]),
        np.concatenate([rate[keep], -rate[keep]]),
    )


def utilisation_grid(result: SimResult, bins: int = TIME_BINS) -> tuple[np.ndarray, np.ndarray]:
    """(link indices, utilisation[link, time bin]) of the busiest links (idle ones last if they
    fit). With a rate trace (`simulate_flow(..., trace=True)`) the rates are exact; otherwise each
    transfer's bytes are spread evenly over its sending interval (after α, before the last path
    latency), exact when no link is shared at once (the sweep, the round model) and an average
    under max-min sharing, where it can add up to more than a link locally. Bytes per bin: with
    F(t) the bytes sent up to t, F(edge) = edge·Σ Δrate − Σ Δrate·t over earlier rate changes."""
    s = result.schedule
    cp = compile_paths(s)
    cap = s.topology.compiled.capacity
    width = result.time_s / bins if result.time_s > 0 else 1.0
    busiest = np.argsort(-result.link_bytes, kind="stable")[:MAX_LINKS]  # idle links included
    row = np.full(len(cap), -1)
    row[busiest] = np.arange(len(busiest))
    rows, times, change = _rate_changes(result, cp, row)
    where = np.clip((times / width).astype(np.int64), 0, bins - 1)
    slope = np.zeros((len(busiest), bins))
    moment = np.zeros((len(busiest), bins))
    np.add.at(slope, (rows, where), change)
    np.add.at(moment, (rows, where), change * times)
    edges = np.arange(1, bins + 1) * width
    sent = edges * np.cumsum(slope, axis=1) - np.cumsum(moment, axis=1)  # F at the right edge of each bin
    per_bin = np.diff(np.concatenate([np.zeros((len(busiest), 1)), sent], axis=1), axis=1)
    return busiest, np.clip(per_bin / (cap[busiest][:, None] * width), 0, None)


def plot_simulation(result: SimResult, path: str | os.PathLike) -> None:
    """Two panels: utilisation of the busiest links over time, and a timeline of transfers by
    source rank, with the lower bound marked."""
    plt = pyplot()
    s = result.schedule
    links, util = utilisation_grid(result)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 8), sharex=True)
    c = s.topology.compiled
    scale = 1e3  # milliseconds
    image = top.imshow(
        util,
        aspect="auto",
        interpolation="nearest",
        cmap="viridis",
        vmin=0,
        vmax=1,
        extent=(0, result.time_s * scale, len(links) - 0.5, -0.5),
    )
    fig.colorbar(image, ax=top, label="utilisation")
    if len(links) <= 32:
        top.set_yticks(
            range(len(links)),
            [f"{c.node_ids[c.link_src[i]]}→{c.node_ids[c.link_dst[i]]}" for i in links],
            fontsize=6,
        )
    idle = int((result.link_bytes[links] == 0).sum())
    top.set_ylabel(f"{len(links)} links, busiest first ({idle} idle)")
    top.set_title(
        f"{s.algorithm} on {s.topology.name}, {s.nbytes / 1e6:g} MB, {result.model} model: "
        f"{result.time_s * scale:.3f} ms, gap {result.gap:.2f}× the bound"
    )
    rank_of = s.rank_of_node[s.src]
    shown = np.linspace(0, len(s) - 1, min(len(s), MAX_BARS)).astype(np.int64) if len(s) else np.zeros(0, int)
    bottom.hlines(
        rank_of[shown],
        result.start[shown] * scale,
        result.end[shown] * scale,
        colors=np.where(s.op[shown] == 0, "tab:blue", "tab:green"),
        linewidth=2,
    )
    bottom.axvline(result.bound_s * scale, color="tab:red", linestyle="--", label="lower bound")
    bottom.set_xlabel("time (ms)")
    bottom.set_ylabel("source rank")
    note = "" if len(shown) == len(s) else f" ({len(shown)} of {len(s)} transfers)"
    bottom.set_title(f"transfers: reduce blue, copy green{note}")
    bottom.legend(loc="upper right")
    save_figure(fig, path)


def draw_topology(topology: Topology, path: str | os.PathLike) -> None:
    """Servers as blue circles, switches as orange squares; a force layout above 300 nodes."""
    plt = pyplot()
    import networkx as nx

    g = topology.to_networkx().to_undirected()
    pos = nx.kamada_kawai_layout(g) if len(g) <= 300 else nx.spring_layout(g, seed=0, iterations=60)
    fig, ax = plt.subplots(figsize=(8, 8))
    nx.draw_networkx_edges(g, pos, ax=ax, alpha=0.3, width=0.6)
    for kind, shape, color in (("server", "o", "tab:blue"), ("switch", "s", "tab:orange")):
        nodes = [n for n, d in g.nodes(data=True) if d["kind"] == kind]
        nx.draw_networkx_nodes(
            g,
            pos,
            nodelist=nodes,
            node_shape=shape,
            node_color=color,
            node_size=max(8, 3000 // max(len(g), 1)),
            ax=ax,
            label=kind,
        )
    if len(g) <= 64:
        nx.draw_networkx_labels(g, pos, font_size=7, ax=ax)
    ax.set_title(f"{topology.name}: {len(topology.servers)} servers, {len(topology.switches)} switches")
    ax.legend(loc="upper right")
    ax.axis("off")
    save_figure(fig, path)


def plot_gaps(rows, title: str, path: str | os.PathLike) -> None:
    """Grouped bars: gap to the bound of every algorithm (groups) at every size (bars)."""
    plt = pyplot()
    names = list(dict.fromkeys(r.algorithm for r in rows))
    sizes = list(dict.fromkeys(r.bytes for r in rows))
    gap = {(r.algorithm, r.bytes): r.gap for r in rows}
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(names)), 4))
    width = 0.8 / len(sizes)
    for k, size in enumerate(sizes):
        xs = np.arange(len(names)) + k * width
        ax.bar(xs, [gap[(n, size)] for n in names], width, label=f"{size / 1e6:g} MB")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(np.arange(len(names)) + width * (len(sizes) - 1) / 2, names, rotation=30, ha="right")
    ax.set_yscale("log")
    ax.set_ylabel("gap = time / lower bound (1 is optimal)")
    ax.set_title(title)
    ax.legend()
    save_figure(fig, path)
