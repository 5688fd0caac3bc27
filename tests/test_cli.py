"""The command line: topology, bound and validate, their JSON output, files they write, and the
one-line error with exit code 2 for every bad input."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from arsched.bounds import allgather_bound, allreduce_bound, latency_bound
from arsched.collective import Transfer, save
from arsched.topology import DEFAULT_BANDWIDTH, Topology, load, parse_spec
from clihelp import PNG_MAGIC, assert_one_line_error, run
from schedules import make, ps_transfers, ring_allreduce

# ---- topology --------------------------------------------------------------------------------


def test_topology_json_bcube(capsys):
    code, out, err = run(capsys, "topology", "bcube:n=4,k=1", "--json")
    assert (code, err) == (0, "")
    info = json.loads(out)
    # BCube(n=4, k=1): n^(k+1) servers with k+1 ports, (k+1) n^k switches, two links per port;
    # two servers differing in both digits are 4 hops apart (server-switch-server-switch-server)
    assert info["servers"] == 16 and info["switches"] == 2 * 4
    assert info["directed_links"] == 2 * 16 * 2
    assert info["ports_per_server"] == 2
    assert info["diameter_hops"] == 4
    assert info["allreduce_bound_s_per_byte"] == pytest.approx(2 * 15 / 16 / 2 / DEFAULT_BANDWIDTH, rel=1e-9)


def test_topology_json_fattree(capsys):
    code, out, _ = run(capsys, "topology", "fattree:k=4", "--json")
    assert code == 0
    info = json.loads(out)
    k = 4
    assert info["servers"] == k**3 // 4 and info["switches"] == 5 * k**2 // 4
    # cables: host-edge k^3/4, edge-aggregation k (k/2)^2, aggregation-core k (k/2)^2
    assert info["directed_links"] == 2 * (k**3 // 4 + 2 * k * (k // 2) ** 2)
    assert info["ports_per_server"] == 1
    assert info["diameter_hops"] == 6  # host-edge-agg-core-agg-edge-host
    assert info["allreduce_bound_s_per_byte"] == pytest.approx(2 * 15 / 16 / DEFAULT_BANDWIDTH, rel=1e-9)
    for key in ("servers", "switches", "directed_links", "ports_per_server", "diameter_hops"):
        assert key in info


def test_topology_table_mentions_the_network(capsys):
    code, out, _ = run(capsys, "topology", "ring:n=5")
    assert code == 0 and "ring(5)" in out


def _same_network(a: Topology, b: Topology) -> bool:
    return (a.name, a.nodes, [a.kind(n) for n in a.nodes], set(a.links)) == (
        b.name,
        b.nodes,
        [b.kind(n) for n in b.nodes],
        set(b.links),
    )


@pytest.mark.parametrize("flag", ["--out", "-o"])
@pytest.mark.parametrize("spec", ["bcube:n=3,k=1", "fattree:k=4,bandwidth=25Gbps/100Gbps/400Gbps"])
def test_topology_out_json_loads_back_equal(capsys, tmp_path, spec, flag):
    target = tmp_path / "t.json"
    code, _, _ = run(capsys, "topology", spec, flag, str(target))
    assert code == 0
    assert load(target) == parse_spec(spec)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


@pytest.mark.parametrize("spec", ["bcube:n=3,k=1", "fattree:k=4,bandwidth=25Gbps/100Gbps/400Gbps"])
def test_topology_out_graphml_loads_back_the_same_network(capsys, tmp_path, spec):
    target = tmp_path / "t.graphml"
    code, _, _ = run(capsys, "topology", spec, "--out", str(target))
    assert code == 0
    assert _same_network(load(target), parse_spec(spec))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.graphml"]


def test_topology_out_graphml_loads_back_equal(capsys, tmp_path):
    target = tmp_path / "t.graphml"
    assert run(capsys, "topology", "fattree:k=4", "--out", str(target))[0] == 0
    assert load(target) == parse_spec("fattree:k=4")


def test_topology_draw_writes_a_png(capsys, tmp_path):
    target = tmp_path / "net.png"
    code, _, err = run(capsys, "topology", "bcube:n=3,k=1", "--draw", str(target))
    assert (code, err) == (0, "")
    assert target.read_bytes()[:8] == PNG_MAGIC
    assert sorted(p.name for p in tmp_path.iterdir()) == ["net.png"]


# ---- bound -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "size", "nbytes"), [("torus:dims=4x4", "100MB", 100e6), ("star:n=5", "1GiB", 2**30)]
)
def test_bound_json_matches_the_api(capsys, spec, size, nbytes):
    code, out, err = run(capsys, "bound", "--topology", spec, "--size", size, "--alpha", "5us", "--json")
    assert (code, err) == (0, "")
    info = json.loads(out)
    t = parse_spec(spec)
    assert info["bytes"] == nbytes
    assert info["allreduce_bound_s"] == pytest.approx(allreduce_bound(t, nbytes=nbytes), rel=1e-12)
    assert info["allgather_bound_s"] == pytest.approx(allgather_bound(t, nbytes=nbytes), rel=1e-12)
    assert info["latency_bound_s"] == pytest.approx(latency_bound(t, alpha=5e-6), rel=1e-12)
    assert info["lower_bound_s"] == max(info["allreduce_bound_s"], info["latency_bound_s"])
    assert info["ranks"] == len(t.servers)


def test_bound_torus_closed_form(capsys):
    _, out, _ = run(capsys, "bound", "--topology", "torus:dims=4x4", "--size", "100MB", "--json")
    info = json.loads(out)
    # 15 of 16 ranks behind 4 ports; the farthest pair on a 4x4 torus is 2 + 2 hops of 1 us
    assert info["allreduce_bound_s"] == pytest.approx(2 * 15 / 16 * 100e6 / (4 * DEFAULT_BANDWIDTH), rel=1e-9)
    assert info["latency_bound_s"] == pytest.approx(4e-6, rel=1e-12)


def test_bound_table(capsys):
    code, out, _ = run(capsys, "bound", "-t", "star:n=4", "-s", "1MB")
    assert code == 0 and "star(4)" in out


# ---- validate ------------------------------------------------------------------------------------


def _ring_file(tmp_path: Path) -> Path:
    t = parse_spec("bcube:n=3,k=1")
    path = tmp_path / "ring.json"
    save(ring_allreduce(t, ("s0", "s4", "s8", "s2")), path)
    return path


@pytest.mark.parametrize("numeric", [False, True])
def test_validate_good_file(capsys, tmp_path, numeric):
    path = _ring_file(tmp_path)
    code, out, err = run(capsys, "validate", str(path), *(["--numeric"] if numeric else []))
    assert (code, err) == (0, "")
    assert out.count("\n") == 1 and out.startswith(f"OK {path}")
    assert ("numeric check passed" if numeric else "valid AllReduce") in out


def test_validate_incomplete_schedule_exits_1(capsys, tmp_path):
    t = parse_spec("star:n=4")
    ranks = ("s0", "s1", "s2", "s3")
    path = tmp_path / "bad.json"
    save(make(t, ranks, ps_transfers(ranks, 2)[:-1], 2), path)  # s3 never gets chunk 1
    code, out, err = run(capsys, "validate", str(path))
    assert (code, err) == (1, "")
    assert out.count("\n") == 1 and out.startswith(f"INVALID {path}")
    assert "s3" in out and "chunk 1" in out


def test_validate_double_count_exits_1(capsys, tmp_path):
    t = parse_spec("star:n=4")
    ranks = ("s0", "s1", "s2", "s3")
    path = tmp_path / "twice.json"
    save(make(t, ranks, [*ps_transfers(ranks, 2), Transfer(2, 0, "s1", "s0")], 2), path)
    code, out, _ = run(capsys, "validate", str(path))
    assert code == 1 and "second time" in out


def test_validate_malformed_and_missing_files_exit_2(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "arsched.schedule/1", "transfers": [', encoding="utf-8")
    code, out, err = run(capsys, "validate", str(bad))
    assert_one_line_error(code, err)
    assert out == "" and str(bad) in err
    code, out, err = run(capsys, "validate", str(tmp_path / "missing.json"))
    assert_one_line_error(code, err)
    assert "missing.json" in err


# ---- bad input everywhere ---------------------------------------------------------------------------

BAD = {
    "unknown family": ["topology", "nosuch:n=4", "--out", "{d}/t.json"],
    "missing parameter": ["topology", "bcube:n=4", "--out", "{d}/t.json"],
    "unknown parameter": ["topology", "star:n=4,m=3", "--draw", "{d}/t.png"],
    "non-integer parameter": ["topology", "ring:n=four", "--out", "{d}/t.json"],
    "bad parameter value": ["topology", "ring:n=1", "--out", "{d}/t.json"],
    "bad size unit": ["bound", "--topology", "star:n=4", "--size", "10XB"],
    "negative size": ["bound", "--topology", "star:n=4", "--size", "-1MB"],
    "zero size": ["bound", "--topology", "star:n=4", "--size", "0"],
    "bad alpha": ["bound", "--topology", "star:n=4", "--alpha", "5 parsecs"],
    "bound without topology": ["bound", "--size", "1MB"],
    "unknown option": ["topology", "star:n=4", "--bogus", "--out", "{d}/t.json"],
    "unknown command": ["frobnicate", "star:n=4"],
    "out with a bad extension": ["topology", "star:n=4", "--out", "{d}/t.txt"],
    "draw with a bad extension": ["topology", "star:n=4", "--draw", "{d}/t.jpg"],
    "out into a missing folder": ["topology", "star:n=4", "--out", "{d}/nope/t.json"],
    "draw into a missing folder": ["topology", "star:n=4", "--draw", "{d}/nope/t.png"],
    "missing topology file": ["topology", "{d}/nothing.graphml"],
}


@pytest.mark.parametrize("argv", list(BAD.values()), ids=list(BAD))
def test_bad_input_gives_one_line_and_exit_2(capsys, tmp_path, argv):
    code, out, err = run(capsys, *(a.format(d=tmp_path) for a in argv))
    assert_one_line_error(code, err)
    assert out == ""
    assert list(tmp_path.iterdir()) == []  # nothing written, not even a temporary file


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "arsched.cli", *argv], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_subprocess_good_run(tmp_path):
    p = _cli("topology", "dcell:n=2,k=1", "--json", "--out", "d.json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    info = json.loads(p.stdout)
    assert info["servers"] == 6 and info["ports_per_server"] == 2
    assert load(tmp_path / "d.json") == parse_spec("dcell:n=2,k=1")


@pytest.mark.parametrize(
    "argv",
    [
        ["topology", "nosuch:n=4", "--out", "t.json"],
        ["bound", "--topology", "star:n=4", "--size", "10XB", "--json"],
        ["topology", "star:n=4", "--bogus"],
    ],
)
def test_subprocess_bad_input(tmp_path, argv):
    p = _cli(*argv, cwd=tmp_path)
    assert_one_line_error(p.returncode, p.stderr)
    assert p.stdout == ""
    assert list(tmp_path.iterdir()) == []


# ---- tables at 80 columns --------------------------------------------------------------------

TABLES = {
    "compare, rounds model": [
        "compare", "-t", "torus:dims=3x3", "-a", "ps,sharded-ps,multi-ring,torus-native",
        "--size", "64KB,256MB", "--model", "rounds",
    ],
    "cluster compare": [
        "cluster", "compare", "--trace", "synthetic:jobs=12,seed=1", "--cluster",
        "leafspine:leaves=2,spines=1,servers_per_leaf=2,gpus=4", "--schedulers", "gadget,tiresias",
        "--network", "reserved,shared",
    ],
    "simulate": ["simulate", "{d}/ring.json", "--model", "rounds"],
    "topology": ["topology", "jellyfish:switches=8,ports=4,net_ports=3"],
    "bound": ["bound", "-t", "jellyfish:switches=8,ports=4,net_ports=3", "--size", "1GiB"],
}  # fmt: skip


@pytest.mark.parametrize("argv", list(TABLES.values()), ids=list(TABLES))
def test_tables_cut_nothing_at_80_columns(capsys, monkeypatch, tmp_path, argv):
    from arsched.cli.common import out as console

    monkeypatch.setenv("COLUMNS", "80")
    assert console.width == 80
    _ring_file(tmp_path)
    code, out, err = run(capsys, *(a.format(d=tmp_path) for a in argv))
    assert (code, err) == (0, "")
    assert "…" not in out, out  # no name or number cut short
    assert max(len(line) for line in out.splitlines()) <= 80, out
    if argv[0] == "compare":
        assert "sharded-ps" in out and "torus-native" in out and "multi-ring" in out


def test_verbose_shows_the_librarys_decisions_on_stderr_only(capsys, tmp_path):
    """`-v` turns on logging: tree packing says which plans it weighed; stdout stays the same."""
    import logging

    out = tmp_path / "t.json"
    argv = ("schedule", "-t", "torus:dims=3x3", "-a", "tree-packing", "--size", "64MB", "-o", str(out))
    root = logging.getLogger()
    try:
        code, quiet_out, quiet_err = run(capsys, *argv)
        assert code == 0 and "tree-packing:" not in quiet_err
        code, loud_out, loud_err = run(capsys, "-v", *argv)
        timing = re.compile(r"synthesised in [\d.]+ s")  # the one wall-clock figure
        assert code == 0 and timing.sub("", " ".join(loud_out.split())) == timing.sub(
            "", " ".join(quiet_out.split())
        )
        assert timing.search(" ".join(quiet_out.split()))
        assert "pipeline" in loud_err and "balanced steps" in loud_err
    finally:
        root.setLevel(logging.WARNING)
        for handler in root.handlers[:]:
            root.removeHandler(handler)


def test_json_output_is_valid_json_even_for_undefined_numbers(capsys):
    """NaN and infinities become null (strict JSON has neither)."""
    from arsched.cli.common import emit_json

    emit_json({"mean": float("nan"), "worst": [1.5, float("inf")], "nested": {"x": -float("inf")}})
    text = capsys.readouterr().out
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in JSON")) == {
        "mean": None,
        "worst": [1.5, None],
        "nested": {"x": None},
    }


def test_auto_status_line_shows_the_search_on_a_terminal_only(monkeypatch, capsys):
    """On a terminal, auto's INFO records become a transient status line (and its logger's level
    comes back after); elsewhere nothing is drawn and nothing changes."""
    import logging

    import arsched.cli.common as common

    log = logging.getLogger("arsched.algorithms.auto")
    level = log.level
    with common.log_status(log.name):  # pytest's stderr is no terminal
        log.info("auto: building ring (1 of 2)")
    assert capsys.readouterr().err == "" and log.level == level

    shown = []

    class Status:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def update(self, text):
            shown.append(text)

    class Terminal:
        def __init__(self, stderr):
            pass

        def status(self, text):
            return Status()

    monkeypatch.setattr(common.sys.stderr, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(common, "Console", Terminal)
    with common.log_status(log.name):
        log.info("auto: building %s (%d of %d)", "ring", 1, 2)
    log.info("auto: after the search")
    assert shown == ["auto: building ring (1 of 2)"] and log.level == level
