"""The paper-topology comparison from a config: experiments/hrl_paper.yaml run through
`arsched sweep` (local process pool), its rows turned into the table of docs/results.md, and
the rows of its `rl` block (short hrl trainings) into a second table.

Also measures the sweep itself: wall time, and the pool's efficiency (the sum of the tasks' own
times / (wall time × workers); 1.0 would be perfect parallelism with no overhead).

Run: python benchmarks/bench_sweep.py [CONFIG] [--workers N]
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from arsched.experiments import expand, load_config, read_rows, sweep
from arsched.viz.experiments import by_spec, in_model, labels_of, topology_title

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _table import markdown, publish

ROOT = Path(__file__).resolve().parent.parent


def main(config: Path, workers: int) -> None:
    cfg = load_config(config)
    tasks = expand(cfg)
    with tempfile.TemporaryDirectory() as folder:
        t0 = time.perf_counter()
        summary = sweep(tasks, folder, workers=workers)
        wall = time.perf_counter() - t0
        rows = read_rows(folder, "algorithm")
        trained = read_rows(folder, "rl")
    if summary.failures:
        raise SystemExit(f"{len(summary.failures)} tasks failed: {summary.failures[0][1]}")
    efficiency = sum(float(r["wall_s"]) for r in rows + trained) / (wall * workers)
    top = max(float(r["bytes"]) for r in rows)
    done = [r for m in ("rounds", "flow") for r in in_model(rows, m) if float(r["bytes"]) == top]
    labels = labels_of(done)
    cell: dict[tuple[str, str, str], str] = {}
    for r in done:
        cell[(r["spec"], r["label"], r["model"])] = (
            r["rounds"] if r["model"] == "rounds" else f"{float(r['gap']):.3f}"
        )
    table = []
    for spec, group in by_spec(done).items():
        table.append(
            [topology_title(group), group[0]["ranks"]]
            + [cell.get((spec, lab, "rounds"), "–") for lab in labels]
            + [cell.get((spec, lab, "flow"), "–") for lab in labels]
        )
    per_model = defaultdict(int)
    for r in rows:
        per_model[r["model"]] += 1
    publish(
        "Paper topologies from a config",
        f"{cfg.description} `{config.relative_to(ROOT)}` run by `arsched sweep` with {workers} "
        f"local workers: {len(tasks)} tasks, every schedule validated, in {wall:.1f} s wall time "
        f"(pool efficiency {efficiency:.2f}: the tasks' own times / (wall × workers)). At "
        f"{top / 1e6:g} MB: rounds in the round model (each schedule's rounds move its own chunks, so a "
        "PS with one whole-vector chunk has few, long rounds and tree packing many short ones: read "
        "rounds beside the gaps), then the gap to the lower bound in the flow model (α = 5 µs). "
        "Produced by `benchmarks/bench_sweep.py`.",
        markdown(
            ["topology", "ranks"] + [f"{lab} rounds" for lab in labels] + [f"{lab} gap" for lab in labels],
            table,
        ),
    )
    if trained:
        publish_trainings(config, trained)


def publish_trainings(config: Path, rows: list[dict[str, str]]) -> None:
    """The config's `rl` block: each short training's hrl beside greedy-trees, its warm start."""
    table = [
        [r["topology_name"], r["ranks"], r["seed"], r["iterations"], r["rounds"], r["greedy_rounds"],
         f"{float(r['gap']):.3f}", f"{float(r['greedy_gap']):.3f}", f"{float(r['train_s']):.0f}"]
        for r in sorted(rows, key=lambda r: (r["topology"], int(r["seed"])))
    ]  # fmt: skip
    publish(
        "Short hrl trainings from a config",
        f"The `rl` block of `{config.relative_to(ROOT)}`: `hrl` trained on each topology for the "
        "iterations shown (imitation of the best fixed plan, then group-relative PPO on the flow model's "
        "time; see `arsched train`), then run there at the block's size beside greedy-trees: rounds in the "
        "round model, gap to the lower bound in the flow model. These trainings are kept short so "
        "that `make bench` stays short; the longer per-instance trainings are in the Hierarchical RL "
        "section. Produced by `benchmarks/bench_sweep.py`.",
        markdown(
            [
                "topology",
                "ranks",
                "seed",
                "iterations",
                "hrl rounds",
                "greedy-trees rounds",
                "hrl gap",
                "greedy-trees gap",
                "train s",
            ],
            table,
        ),
    )


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", type=Path, default=ROOT / "experiments" / "hrl_paper.yaml")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    main(args.config.resolve(), args.workers)
