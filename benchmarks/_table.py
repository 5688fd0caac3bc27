"""Shared output of the benchmark scripts: a markdown table printed and kept in docs/results.md."""

from __future__ import annotations

import platform
import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "docs" / "results.md"


def markdown(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def publish(section: str, intro: str, table: str) -> None:
    """Print the table and replace (or add) its section in docs/results.md."""
    machine = f"Machine: {platform.machine()}, Python {platform.python_version()}."
    body = f"## {section}\n\n{intro}\n\n{machine}\n\n{table}\n"
    print(body)
    text = (
        RESULTS.read_text()
        if RESULTS.exists()
        else "# Benchmark results\n\nProduced by the scripts in `benchmarks/`; rerun them: `make bench`.\n"
    )
    pattern = re.compile(rf"^## {re.escape(section)}\n.*?(?=^## |\Z)", re.S | re.M)
    text = pattern.sub(body + "\n", text) if pattern.search(text) else text.rstrip() + "\n\n" + body
    RESULTS.write_text(text)


def previous_rows(section: str) -> list[list[str]]:
    """The rows of the table last published under `section` in docs/results.md (none if absent),
    so that a benchmark rerun on some of its cases can keep the others."""
    if not RESULTS.exists():
        return []
    match = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## |\Z)", RESULTS.read_text(), re.S | re.M)
    lines = [x for x in (match[1].splitlines() if match else []) if x.startswith("|")]
    return [[c.strip() for c in x.strip().strip("|").split("|")] for x in lines[2:]]
