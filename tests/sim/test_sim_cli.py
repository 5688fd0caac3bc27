"""`arsched simulate FILE.json --model flow|rounds [--alpha] [--sync] [--json] [--plot FILE.png]`:
the JSON equals the API's result, the table, the PNG, and one 'error:' line with exit code 2 for
every bad input (invalid schedule, unknown model, a plot name that is not .png)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from simref import make, ps_allreduce, ring_transfers, topo

from arsched.collective import load, save
from arsched.sim import simulate_flow, simulate_rounds
from arsched.topology import star
from clihelp import PNG_MAGIC, assert_one_line_error, run

KEYS = {"time_s", "rounds", "algbw", "busbw", "bound_s", "gap", "transfers"}


@pytest.fixture
def ring_file(tmp_path) -> Path:
    t = topo("bcube:n=3,k=1")
    ranks = t.servers[:6]
    s = make(t, ranks, ring_transfers(ranks), len(ranks), 6e6, "ring")
    path = tmp_path / "ring.json"
    save(s, path)
    return path


@pytest.mark.parametrize(
    ("model", "extra", "alpha"),
    [
        ("flow", [], 5e-6),
        ("flow", ["--alpha", "2us"], 2e-6),
        ("flow", ["--alpha", "0", "--sync"], 0.0),
        ("rounds", [], 0.0),
        ("rounds", ["--alpha", "5us"], 5e-6),
    ],
)
def test_json_equals_the_api(capsys, ring_file, model, extra, alpha):
    code, out, err = run(capsys, "simulate", str(ring_file), "--model", model, "--json", *extra)
    assert (code, err) == (0, "")
    got = json.loads(out)
    assert set(got) >= KEYS
    s = load(ring_file)
    if model == "flow":
        api = simulate_flow(s, alpha, synchronous="--sync" in extra)
    else:
        api = simulate_rounds(s, alpha)
    expect = api.to_dict()
    assert set(got) == set(expect)
    for key, val in expect.items():
        if isinstance(val, float):
            assert got[key] == pytest.approx(val, rel=1e-12), key
        else:
            assert got[key] == val, key
    assert got["alpha_s"] == pytest.approx(alpha, rel=1e-12, abs=0)
    assert got["transfers"] == 2 * 6 * 5
    assert got["gap"] >= 1 - 1e-9
    assert (got["rounds"] is None) == (model == "flow")


def test_default_model_is_flow(capsys, ring_file):
    code, out, _ = run(capsys, "simulate", str(ring_file), "--json")
    assert code == 0
    got = json.loads(out)
    assert got["model"] == "flow" and got["alpha_s"] == 5e-6
    assert got["time_s"] == pytest.approx(simulate_flow(load(ring_file), 5e-6).time_s, rel=1e-12)


def test_table_output(capsys, ring_file):
    code, out, err = run(capsys, "simulate", str(ring_file), "--model", "rounds")
    assert (code, err) == (0, "")
    res = simulate_rounds(load(ring_file))
    assert "rounds" in out and str(res.rounds) in out
    assert f"{res.time_s * 1e3:.4f} ms" in out
    assert "gap" in out


@pytest.mark.parametrize("model", ["flow", "rounds"])
def test_plot_writes_a_png(capsys, ring_file, tmp_path, model):
    png = tmp_path / f"sim-{model}.png"
    code, out, err = run(capsys, "simulate", str(ring_file), "--model", model, "--plot", str(png))
    assert (code, err) == (0, "")
    assert png.read_bytes()[:8] == PNG_MAGIC
    assert f"wrote {png}" in out.replace("\n", "")
    # with --json too: stdout stays pure JSON
    png2 = tmp_path / "again.png"
    code, out, _ = run(capsys, "simulate", str(ring_file), "--model", model, "--json", "--plot", str(png2))
    assert code == 0 and json.loads(out)["model"] == model
    assert png2.read_bytes()[:8] == PNG_MAGIC


def test_invalid_schedule_is_one_error_line(capsys, tmp_path):
    t = star(4)
    s = ps_allreduce(t, t.servers)
    broken = make(t, t.servers, s.transfers[:-1], 1)  # a rank never receives the sum
    path = tmp_path / "broken.json"
    save(broken, path)
    code, out, err = run(capsys, "simulate", str(path), "--json")
    assert_one_line_error(code, err)
    assert out == ""
    assert "broken.json" in err


@pytest.mark.parametrize("text", ["{not json", '{"format": "something/1"}', "[]"])
def test_malformed_file_is_one_error_line(capsys, tmp_path, text):
    path = tmp_path / "bad.json"
    path.write_text(text)
    code, out, err = run(capsys, "simulate", str(path))
    assert_one_line_error(code, err)
    assert out == ""


def test_missing_file_is_one_error_line(capsys, tmp_path):
    code, _, err = run(capsys, "simulate", str(tmp_path / "nope.json"))
    assert_one_line_error(code, err)


def test_unknown_model(capsys, ring_file):
    code, out, err = run(capsys, "simulate", str(ring_file), "--model", "foo")
    assert_one_line_error(code, err)
    assert "foo" in err and out == ""


@pytest.mark.parametrize("name", ["sim.jpg", "sim.pdf", "sim"])
def test_plot_needs_a_png_name(capsys, ring_file, tmp_path, name):
    target = tmp_path / name
    code, out, err = run(capsys, "simulate", str(ring_file), "--plot", str(target))
    assert_one_line_error(code, err)
    assert out == ""
    assert ".png" in err
    assert not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ring.json"]


def test_plot_into_a_missing_folder(capsys, ring_file, tmp_path):
    code, _, err = run(capsys, "simulate", str(ring_file), "--plot", str(tmp_path / "no" / "sim.png"))
    assert_one_line_error(code, err)
    assert not (tmp_path / "no").exists()


def test_bad_alpha(capsys, ring_file):
    code, _, err = run(capsys, "simulate", str(ring_file), "--alpha", "5 parsecs")
    assert_one_line_error(code, err)
