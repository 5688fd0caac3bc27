"""The HTML report: one self-contained page (plots as base64 PNG, data as embedded CSV links) from
the results folders of one or more sweeps. Viewing it needs no network and no other file."""

from __future__ import annotations

import base64
import html
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

from arsched.collective.kinds import NAMES, TITLES
from arsched.errors import ArschedError
from arsched.experiments.sweep import read_rows
from arsched.experiments.tasks import KINDS
from arsched.fileio import write_atomic
from arsched.viz import experiments as plots

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;
margin:2rem auto;max-width:1200px;
color:#222;padding:0 1rem}
h1{margin-bottom:.2rem} h2{border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2rem}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0 1rem}
th,td{border:1px solid #ddd;padding:.2rem .5rem;text-align:right} th{background:#f4f4f4}
td:first-child,th:first-child{text-align:left} td.best{font-weight:bold;background:#e8f5e9}
img{max-width:100%;border:1px solid #eee} .muted{color:#777;font-size:.85rem}
details{margin:.5rem 0} summary{cursor:pointer}
"""


def _img(png: bytes | None, alt: str) -> str:
    if png is None:
        return ""
    data = base64.b64encode(png).decode("ascii")
    return f'<p><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"></p>'


def _table(header: Sequence[str], body: Sequence[Sequence[str]], best: Sequence[int | None] = ()) -> str:
    """An HTML table; `best[i]` marks the best cell of row i (a column index)."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    lines = []
    for i, row in enumerate(body):
        mark = best[i] if i < len(best) else None
        cells = "".join(
            f"<td{' class=best' if j == mark else ''}>{html.escape(c)}</td>" for j, c in enumerate(row)
        )
        lines.append(f"<tr>{cells}</tr>")
    return f"<table><tr>{head}</tr>{''.join(lines)}</table>"


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _means_by_label(rows: Sequence[dict[str, str]], column: str, labels: Sequence[str]) -> list[float]:
    """The mean of `column` per label (over seeds), in the order of `labels`; inf for a label
    without rows."""
    values: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        values[r["label"]].append(float(r[column]))
    return [_mean(values[lab]) if values[lab] else math.inf for lab in labels]


def gap_table(rows: Sequence[dict[str, str]], model: str, nbytes: float) -> str:
    """Topologies × algorithms: mean gap to the bound (over seeds) at one size, best in bold."""
    rows = [r for r in plots.in_model(rows, model) if float(r["bytes"]) == nbytes]
    if not rows:
        return ""
    labels = plots.labels_of(rows)
    body, best = [], []
    for group in plots.by_spec(rows).values():
        means = _means_by_label(group, "gap", labels)
        body.append(
            [
                plots.topology_title(group),
                group[0]["ranks"],
                *(f"{m:.3f}" if m < math.inf else "–" for m in means),
            ]
        )
        best.append(2 + means.index(min(means)))
    return _table(["topology", "ranks", *labels], body, best)


def _rounds_table(rows: Sequence[dict[str, str]]) -> str:
    rows = [r for r in plots.finished(rows) if r["model"] == "rounds" and r["rounds"]]
    if not rows:
        return ""
    top = max(float(r["bytes"]) for r in rows)
    rows = [r for r in rows if float(r["bytes"]) == top]
    labels = plots.labels_of(rows)
    body, best = [], []
    for group in plots.by_spec(rows).values():
        means = _means_by_label(group, "rounds", labels)
        body.append([plots.topology_title(group), *(f"{m:.4g}" if m < math.inf else "–" for m in means)])
        best.append(1 + means.index(min(means)))
    return _table(["topology", *labels], body, best)


def _intro(title: str, note: str) -> list[str]:
    """A section's heading and its muted explanation (`note` is HTML)."""
    return [f"<h2>{title}</h2>", f'<p class="muted">{note}</p>']


def _csv_link(folder: Path, kind: str) -> str:
    path = folder / f"{kind}.csv"
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    name = html.escape(f"{folder.name}-{kind}.csv")
    return f'<a download="{name}" href="data:text/csv;base64,{data}">{name}</a>'


def _algorithm_section(rows: list[dict[str, str]]) -> str:
    """The gap tables and plots, one part per collective where a sweep ran several."""
    parts = _intro(
        "Algorithms: gap to the lower bound",
        "Gap = simulated time / lower bound of the schedule's own collective (1 is optimal), mean "
        "over seeds; the best algorithm of each topology in bold. Every schedule passed the "
        "validator before it was simulated.",
    )
    by_collective: dict[str, list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        by_collective[r.get("collective") or "allreduce"].append(r)
    for collective in [c for c in NAMES if c in by_collective]:
        if len(by_collective) > 1:
            parts.append(f"<h2>{TITLES[collective]}</h2>")
        parts += _algorithm_parts(by_collective[collective])
    return "\n".join(parts)


def _algorithm_parts(rows: list[dict[str, str]]) -> list[str]:
    """One collective's gap tables, plots, rounds and the runs that did not apply."""
    parts = []
    flow_sizes = sorted({float(r["bytes"]) for r in plots.finished(rows) if r["model"] == "flow"})
    for size in dict.fromkeys([flow_sizes[0], flow_sizes[-1]] if flow_sizes else []):
        parts.append(f"<h3>Flow model, {plots.size_label(size)}</h3>{gap_table(rows, 'flow', size)}")
    parts.append(_img(plots.gap_bars(rows, "flow"), "gap to bound per topology"))
    parts.append(_img(plots.time_vs_size(rows), "time against message size"))
    rounds = _rounds_table(rows)
    if rounds:
        parts.append("<h2>Round model</h2>")
        parts.append('<p class="muted">Rounds of every schedule at the largest size (fewest in bold).</p>')
        parts.append(rounds)
        parts.append(_img(plots.rounds_vs_bound(rows), "rounds against the bound"))
    skipped = sorted({(r["label"], r["topology_name"], r["note"]) for r in rows if r["note"]})
    if skipped:
        items = "".join(f"<li>{html.escape(f'{a} on {t}: {n}')}</li>" for a, t, n in skipped)
        parts.append(
            f"<details><summary>{len(skipped)} runs did not apply</summary><ul>{items}</ul></details>"
        )
    return parts


def _num(text: str) -> float:
    """A CSV cell as a number; empty or nan cells sort last (inf)."""
    v = float(text) if text else math.nan
    return math.inf if math.isnan(v) else v


def _cluster_table(rows: list[dict[str, str]]) -> str:
    """Schedulers × network modes: the metrics of `arsched cluster run`, mean over seeds; the
    lowest mean JCT in bold."""
    cols = [("avg_jct_s", ".0f"), ("p95_jct_s", ".0f"), ("makespan_s", ".0f"), ("total_utility", ".2f"),
            ("gpu_utilization", ".3f"), ("energy_kwh", ".1f"), ("jain_index", ".3f")]  # fmt: skip
    body, jct = [], []
    for (scheduler, network), group in plots.by_scheduler(rows).items():
        means = [_mean([_num(r[c]) for r in group]) for c, _ in cols]
        done = f"{_mean([int(r['finished']) for r in group]):g}/{group[0]['jobs']}"
        ms = _mean([float(r["scheduler_s_per_slot"]) for r in group]) * 1e3
        cells = [f"{m:{f}}" if m < math.inf else "–" for m, (_, f) in zip(means, cols, strict=True)]
        body.append([scheduler, network, str(len(group)), done, *cells, f"{ms:.2f}"])
        jct.append(means[0])
    best = [4 if m == min(jct) and m < math.inf else None for m in jct]
    header = ["scheduler", "network", "seeds", "finished", "avg JCT s", "p95 JCT s", "makespan s", "utility",
              "GPU util", "kWh", "Jain", "ms/slot"]  # fmt: skip
    return _table(header, body, best)


def _cluster_section(rows: list[dict[str, str]]) -> str:
    parts = _intro(
        "Cluster scheduling: job completion times and GPU utilisation",
        "Each trace run on the cluster by every scheduler (arsched.cluster; deciding at arrivals, "
        "completions and the scheduler's own events, or every slot where the block says engine: slots); "
        "network <i>reserved</i> is GADGET's model (bandwidth reserved per ring), <i>shared</i> lets the "
        "rings share links max-min fairly. Metrics are those of <code>arsched cluster run</code>, mean "
        "over seeds (only randomised schedulers take a seed); the lowest mean JCT in bold. The plots show "
        "the first seed of each scheduler.",
    )
    groups: dict[tuple[str, str, str], list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        groups[(r["trace"], r["cluster"], r["objective"])].append(r)
    for (trace, cluster, objective), group in sorted(groups.items()):
        title = f"{trace} ({group[0]['jobs']} jobs) on {cluster}, objective {objective}"
        parts.append(f"<h3>{html.escape(title)}</h3>")
        parts.append(_cluster_table(group))
        parts.append(_img(plots.cluster_panels(group), f"JCT CDF and GPU utilisation, {trace}"))
    return "\n".join(parts)


def _rl_section(rows: list[dict[str, str]]) -> str:
    """Per training: the trained policy (hrl) beside greedy-trees on its topology."""
    body, best = [], []
    for r in sorted(rows, key=lambda r: (r["topology"], int(r["seed"]), int(r["iterations"]))):
        gaps = (float(r["gap"]), float(r["greedy_gap"]))
        body.append(
            [
                r["topology_name"],
                r["ranks"],
                r["seed"],
                r["iterations"],
                *(f"{g:.3f}" for g in gaps),
                r["rounds"],
                r["greedy_rounds"],
                f"{float(r['train_s']):.0f}",
                r["checkpoint"],
            ]
        )
        best.append(None if gaps[0] == gaps[1] else 4 + gaps.index(min(gaps)))
    header = ["topology", "ranks", "seed", "iterations", "hrl gap", "greedy-trees gap", "hrl rounds",
              "greedy-trees rounds", "training s", "checkpoint"]  # fmt: skip
    return (
        "<h2>Hierarchical deep RL: trained policies</h2>"
        '<p class="muted">Each policy trained (<code>arsched train</code>, reward: the flow model\'s time) '
        "on one topology and evaluated there beside greedy-trees, the paper's heuristic (the policy "
        "starts from the topology's best fixed plan, of which greedy-trees' is one): gap to "
        "the lower bound in the flow model (the lower in bold), rounds in the round model, both at the "
        "block's message size. Checkpoints are in the results folder; run one with <code>arsched "
        "schedule -a hrl --checkpoint DIR/CHECKPOINT</code>.</p>" + _table(header, body, best)
    )


def _about(folder: Path) -> str:
    """The name and description of the config a folder's sweep ran (saved there by arsched sweep)."""
    import yaml

    path = folder / "config.yaml"
    if not path.exists():
        return ""
    try:
        cfg = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError):
        raise ArschedError(f"{path} is not the config arsched sweep saved there; move it away") from None
    if not isinstance(cfg, dict):
        cfg = {}
    name, about = (html.escape(str(cfg.get(k, d))) for k, d in (("name", folder.name), ("description", "")))
    return f"<p><b>{name}</b>: {about}</p>"


# Report sections per task kind, each shown only when the folders hold rows of its kind.
SECTIONS: dict[str, Callable[[list[dict[str, str]]], str]] = {
    "algorithm": _algorithm_section,
    "cluster": _cluster_section,
    "rl": _rl_section,
}


def render(folders: Sequence[str | Path]) -> str:
    """The report's HTML for the results in `folders`."""
    folders = [Path(f) for f in folders]
    for f in folders:
        if not f.is_dir():
            raise ArschedError(f"results folder {f} does not exist; run arsched sweep first")
    rows: dict[str, list[dict[str, str]]] = {}
    links = []
    for kind in KINDS:
        seen: dict[str, dict[str, str]] = {}
        for f in folders:
            got = read_rows(f, kind)
            if got:
                links.append(_csv_link(f, kind))
            for r in got:
                seen.setdefault(r["task_id"], r)
        if seen:
            rows[kind] = list(seen.values())
    if not rows:
        raise ArschedError(f"no results in {', '.join(map(str, folders))}; run arsched sweep first")
    counts = ", ".join(f"{len(v)} {k} runs" for k, v in rows.items())
    body = ["<h1>arsched report</h1>", *map(_about, folders)]
    body += [
        f'<p class="muted">{html.escape(", ".join(str(f) for f in folders))}: {counts}. '
        f"Data: {' '.join(links)}</p>",
    ]
    body += [SECTIONS[k](v) for k, v in rows.items() if k in SECTIONS]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>arsched report</title><style>{STYLE}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def write_report(folders: Sequence[str | Path], out_dir: str | Path) -> Path:
    """Write `out_dir/index.html` (the folder is created) and return its path."""
    page = render(folders)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "index.html", page)
    return out / "index.html"
