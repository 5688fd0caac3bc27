"""The HTML report: self-contained (no network), tables and plots from the rows, and it renders in
headless Chromium (that part skipped where chromium is not installed)."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess

import numpy as np
import pytest

from arsched.experiments import expand, load_config, read_rows, sweep
from clihelp import PNG_MAGIC, assert_one_line_error, run


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    from expconfigs import SMALL

    folder = tmp_path_factory.mktemp("report")
    config = folder / "small.yaml"
    config.write_text(SMALL)
    sweep(expand(load_config(config)), folder / "runs", workers=1)
    (folder / "runs" / "config.yaml").write_text(SMALL)
    return folder / "runs"


@pytest.fixture(scope="module")
def page(results, tmp_path_factory):
    """The report of the small sweep, written by the CLI."""
    from arsched.cli import main

    out = tmp_path_factory.mktemp("rep")
    with pytest.raises(SystemExit) as done:
        main(["report", str(results), "--out", str(out)])
    assert done.value.code == 0
    return out / "index.html"


def test_report_is_self_contained_and_renders_in_chromium(results, page, tmp_path):
    """One test, so that the report is rendered once even when tests run in parallel."""
    _check_html(results, page.read_text())
    if shutil.which("chromium") is None:
        pytest.skip("chromium is not installed: the HTML checks passed, the rendering was not checked")
    from arsched.viz.plots import pyplot

    shot = tmp_path / "report.png"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
    subprocess.run(
        ["chromium", *flags, "--window-size=1200,1600", f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        timeout=60,
        check=True,
    )
    print(f"screenshot: {shot}")
    image = pyplot().imread(shot)
    assert image.shape[:2] == (1600, 1200)
    # the page drew something: many distinct colours, not one blank background
    assert len(np.unique(image.reshape(-1, image.shape[2]), axis=0)) > 50


def _check_html(results, page: str) -> None:
    assert not re.search(r"(src|href)=\"(https?:)?//", page)  # nothing fetched from a network
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 3  # gap bars, time vs size, rounds vs bound
    assert all(base64.b64decode(i).startswith(PNG_MAGIC) for i in images)
    assert "<b>small</b>: two topologies" in page
    assert "halving-doubling" in page and "ring(4)" in page and "(2 seeds)" in page
    csv_link = re.search(r'href="data:text/csv;base64,([^"]+)"', page).group(1)
    assert base64.b64decode(csv_link) == (results / "algorithm.csv").read_bytes()


def test_gap_table_shows_the_mean_over_seeds(results):
    from arsched.experiments.report import gap_table

    rows = read_rows(results, "algorithm")
    jelly = [
        r
        for r in rows
        if r["spec"].startswith("jellyfish") and r["model"] == "flow" and r["bytes"] == "64000000.0"
    ]
    ps = [float(r["gap"]) for r in jelly if r["algorithm"] == "ps"]
    assert len(ps) == 2
    table = gap_table(rows, "flow", 64e6)
    assert f"{sum(ps) / 2:.3f}" in table


def test_report_of_nothing_is_one_line(capsys, tmp_path):
    code, _, err = run(capsys, "report", str(tmp_path), "--out", str(tmp_path / "rep"))
    assert_one_line_error(code, err)
    code, _, err = run(capsys, "report", str(tmp_path / "missing"))
    assert_one_line_error(code, err)


COLLECTIVES = """
name: collectives
runs:
  - kind: algorithm
    topologies: ["star:n=4"]
    algorithms: [ring, direct, mcf]
    collectives: [allgather, broadcast, alltoall]
    root: s2
    sizes: [1MB]
"""


def test_a_sweep_of_several_collectives_runs_each_algorithm_it_builds_and_groups_the_report(tmp_path):
    from arsched.experiments.report import render

    config = tmp_path / "c.yaml"
    config.write_text(COLLECTIVES)
    tasks = expand(load_config(config))
    pairs = {(dict(t.params)["collective"], dict(t.params)["algorithm"]) for t in tasks}
    # mcf builds only AllToAll, ring no AllToAll: each runs for what it builds
    assert pairs == {
        ("allgather", "ring"), ("allgather", "direct"), ("broadcast", "ring"), ("broadcast", "direct"),
        ("alltoall", "direct"), ("alltoall", "mcf"),
    }  # fmt: skip
    roots = {dict(t.params)["collective"]: dict(t.params)["root"] for t in tasks}
    assert roots == {"allgather": "", "broadcast": "s2", "alltoall": ""}
    sweep(tasks, tmp_path / "runs", workers=1)
    rows = read_rows(tmp_path / "runs", "algorithm")
    assert len(rows) == 6 and all(float(r["gap"]) >= 1 - 1e-9 for r in rows)
    page = render([tmp_path / "runs"])
    assert [m for m in re.findall(r"<h2>(AllGather|Broadcast|AllToAll)</h2>", page)] == [
        "AllGather",
        "Broadcast",
        "AllToAll",
    ]


@pytest.mark.parametrize(
    ("block", "words"),
    [
        ("collectives: [gather]", "collective 'gather' is not one of allreduce"),
        ("collectives: [alltoall]\n    algorithms: [ring]", "no algorithm of the block builds alltoall"),
    ],
)
def test_collectives_a_sweep_cannot_run_are_refused_when_it_loads(tmp_path, block, words):
    from arsched.errors import ArschedError

    text = 'name: x\nruns:\n  - kind: algorithm\n    topologies: ["star:n=4"]\n'
    text += ("    algorithms: [ring]\n" if "algorithms" not in block else "") + f"    {block}\n"
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    with pytest.raises(ArschedError, match=re.escape(words)):
        load_config(config)
