"""Reading the CSV files of the cluster package (traces, Tiresias cluster specs): every way a file
can fail to be CSV text becomes one sentence naming the file."""

from __future__ import annotations

import csv
from pathlib import Path

from arsched.errors import ArschedError


def read_csv(
    path: Path, what: str, rows: int | None = None, columns: tuple[str, ...] | None = None
) -> tuple[list[str], list[dict[str, str]]]:
    """The header and the rows (the first `rows` of them, or all) of a CSV file; `what` says what
    the file is for the error ("trace", "cluster spec"): text that is not UTF-8 or a field past
    the csv module's size limit is refused. `columns` names the columns of a file that has no
    header row (its first line is then a row)."""
    line = 0 if columns else 1
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f, fieldnames=columns)
            header = list(reader.fieldnames or [])
            line = reader.line_num
            out = []
            for rec in reader:
                if rows is not None and len(out) >= rows:
                    break
                out.append(rec)
                line = reader.line_num
            return header, out
    except UnicodeDecodeError:
        raise ArschedError(f"{what} {path} is not UTF-8 text") from None
    except csv.Error as e:
        raise ArschedError(f"{what} {path} line {line + 1} is not CSV: {e}") from None
