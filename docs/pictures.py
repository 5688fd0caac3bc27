"""Regenerate every picture under docs/ from the current code: `python docs/pictures.py`.

docs/report.png (the README's picture of `arsched report`): the report's gap-to-bound bars
(`arsched.viz.experiments.gap_figure`, the plot at the top of the HTML page) for the algorithm
block of experiments/demo.yaml at two sizes instead of four: every algorithm on BCube(3,1),
DCell(2,1), Jellyfish(switches=8, ports=4, net_ports=3) over seeds 1-3 (mean and min-max bar)
and a 3x3 torus, 64 KB and 256 MB per rank, flow model, α = 5 µs. The picture states these
inputs at its foot. Everything it draws is deterministic (schedules, simulations and hrl's
shipped policy), so running it twice writes the same bytes; it takes well under two minutes.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import yaml

from arsched.experiments import expand, parse_config, read_rows, sweep
from arsched.viz.experiments import gap_figure
from arsched.viz.plots import save_figure

DOCS = Path(__file__).resolve().parent
DEMO = DOCS.parent / "experiments" / "demo.yaml"
SIZES = ["64KB", "256MB"]  # two of the demo's four sizes, so that the picture takes about a minute
CAPTION = (
    "docs/pictures.py: experiments/demo.yaml's algorithm block at 64 KB and 256 MB per rank, flow model, "
    "α = 5 µs; Jellyfish over seeds 1-3 (mean, min-max bar)"
)


def report_config() -> dict:
    """experiments/demo.yaml's algorithm block at SIZES, flow model only."""
    demo = yaml.safe_load(DEMO.read_text(encoding="utf-8"))
    runs = [{**r, "sizes": SIZES, "models": ["flow"]} for r in demo["runs"] if r["kind"] == "algorithm"]
    return {"name": "pictures", "runs": runs}


def report_picture(path: Path) -> None:
    """The report's gap bars for report_config(), with CAPTION at the foot."""
    with tempfile.TemporaryDirectory() as tmp:
        summary = sweep(expand(parse_config(report_config())), Path(tmp), workers=1)
        if summary.failures:
            raise RuntimeError(f"{len(summary.failures)} runs failed: {summary.failures[0]}")
        rows = read_rows(Path(tmp), "algorithm")
    fig = gap_figure(rows, "flow")
    fig.text(0.5, -0.01, CAPTION, ha="center", va="top", fontsize=8, color="dimgray")
    save_figure(fig, path)


def main() -> None:
    report_picture(DOCS / "report.png")
    sys.stdout.write(f"wrote {DOCS / 'report.png'}\n")


if __name__ == "__main__":
    main()
