"""Files at the edge: atomic output (a temporary file beside the target, then a rename) and
input read with one clear sentence for a folder, a missing file, bytes that are not UTF-8 or
JSON nested too deeply."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from arsched.errors import ArschedError


def write_atomic(path: str | os.PathLike, data: str | bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the whole new one, never half."""
    target = Path(path)
    if not target.parent.is_dir():
        raise ArschedError(f"cannot write {target}: folder {target.parent} does not exist")
    mode = "wb" if isinstance(data, bytes) else "w"
    fd, tmp = tempfile.mkstemp(dir=target.parent or ".", prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode, **({} if isinstance(data, bytes) else {"encoding": "utf-8"})) as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the mode open() would
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_input(path: str | os.PathLike, what: str, error: type[ArschedError] = ArschedError) -> Path:
    """`path` as a Path if it is a file; otherwise `error` saying it is a folder or missing."""
    p = Path(path)
    if p.is_dir():
        raise error(f"{what} {p} is a folder, not a file")
    if not p.is_file():
        raise error(f"{what} {p} does not exist")
    return p


def read_text(path: str | os.PathLike, what: str, error: type[ArschedError] = ArschedError) -> str:
    """The UTF-8 text of the file `what` at `path`; `error` with one sentence if it is a folder,
    missing, unreadable or not UTF-8."""
    p = check_input(path, what, error)
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{what} {p} is not UTF-8 text (byte {e.start} is {e.object[e.start]:#04x})") from None
    except OSError as e:
        raise error(f"cannot read {what} {p} ({e.strerror or e})") from None


def parse_json(text: str, where: str, error: type[ArschedError] = ArschedError) -> Any:
    """The JSON value of `text` (from `where`); `error` with one sentence if it is not JSON or is
    nested too deeply for the parser."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{where} is not valid JSON ({e.msg} at line {e.lineno})") from None
    except RecursionError:
        raise error(f"{where} nests JSON arrays or objects too deeply to read") from None
