"""Every command that reads a file, run on every file of the hostile corpus in this folder.

The contract (issue 20): exit 0, 1 (a finding: an invalid schedule) or 2; exit 2 means exactly
one line on stderr starting with `error:` and no traceback (nor a warning); nothing is written but the output
named on the command line, and that only on success. The corpus holds small files (schedules/,
topologies/, msccl/, traces/); the large or deep ones are made here (`GENERATED`) instead of stored.
"""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from clihelp import assert_one_line_error, run

HERE = Path(__file__).resolve().parent


def _deep_json(levels: int) -> str:
    return "[" * levels + "]" * levels


def _deep_schedule(levels: int) -> str:
    base = (HERE / "schedules" / "incomplete.json").read_text()
    return base.replace('"meta": {', '"meta": {"deep": ' + _deep_json(levels) + ', "x": {', 1)


# name -> text, made in the test: too large (or too repetitive) to keep in the repository
GENERATED: dict[str, Callable[[], str | bytes]] = {
    "schedules/nested_100k.json": lambda: _deep_json(100_000),
    "schedules/meta_nested_100k.json": lambda: _deep_schedule(100_000),
    "topologies/nested_100k.json": lambda: '{"nodes": ' + _deep_json(100_000) + "}",
    "topologies/field_140k.csv": lambda: "ip,DSW,PSW,ASW\n" + "a" * 140_000 + ",d,p,a\nb,d,p,a\n",
    "topologies/header_field_140k.csv": lambda: "ip,DSW,PSW," + "A" * 140_000 + "\n",
    "msccl/nested_100k.xml": lambda: "<algo>" + "<gpu>" * 100_000 + "</gpu>" * 100_000 + "</algo>",
}

# the commands run on each kind of file; {in} is the input, {out} a file the command may write
COMMANDS = {
    "schedules": [
        ("validate", "{in}"),
        ("validate", "--numeric", "{in}"),
        ("simulate", "{in}", "--json"),
        ("simulate", "{in}", "--model", "rounds"),
        ("export", "{in}", "-o", "{out}.xml"),
        ("bound", "-t", "{in}", "--json"),  # a schedule file carries its topology
        ("run", "{in}", "--repeat", "1", "--timeout", "20"),  # the valid ones on real processes
    ],
    "topologies": [
        ("topology", "{in}", "--json"),
        ("topology", "{in}", "-o", "{out}.json"),
        ("bound", "-t", "{in}", "-s", "1GB", "--json"),
        ("import", str(HERE / "msccl" / "ring3_valid.xml"), "-t", "{in}", "-o", "{out}.json"),
    ],
    "msccl": [
        ("import", "{in}", "-t", "ring:n=3", "-o", "{out}.json"),
    ],
    "traces": [
        ("cluster", "run", "--trace", "{in}", "--json"),
        ("cluster", "run", "--trace", "{in}", "--skip-bad-rows", "--json"),
    ],
}


def _cases() -> list:
    cases = []
    for kind, commands in COMMANDS.items():
        names = sorted(p.name for p in (HERE / kind).iterdir()) + sorted(
            g.split("/")[1] for g in GENERATED if g.startswith(kind + "/")
        )
        for name in names:
            for argv in commands:
                cases.append(pytest.param(kind, name, argv, id=f"{kind}/{name}:{'-'.join(argv[:2])}"))
    return cases


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


@pytest.mark.parametrize(("kind", "name", "argv"), _cases())
def test_hostile_file(kind, name, argv, tmp_path, monkeypatch, capsys):
    work = tmp_path / "work"
    work.mkdir()
    src = tmp_path / "in" / name
    src.parent.mkdir()
    key = f"{kind}/{name}"
    if key in GENERATED:
        data = GENERATED[key]()
        src.write_bytes(data if isinstance(data, bytes) else data.encode())
    else:
        shutil.copyfile(HERE / kind / name, src)
    out = work / "result"
    args = [a.replace("{in}", str(src)).replace("{out}", str(out)) for a in argv]
    monkeypatch.chdir(work)
    before = _files(tmp_path)
    with warnings.catch_warnings(record=True) as caught:  # a warning would be more lines on stderr
        warnings.simplefilter("always")
        code, _, err = run(capsys, *args)
    assert not caught, [str(w.message) for w in caught]
    assert code in (0, 1, 2), (code, err[-2000:])
    assert "Traceback" not in err
    if code == 2:
        assert_one_line_error(code, err)
    written = _files(tmp_path) - before
    named = {str(Path(a).relative_to(tmp_path)) for a in args if a.startswith(str(out))}
    assert written <= (named if code == 0 else set()), written
