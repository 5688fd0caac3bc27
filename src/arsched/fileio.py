"""Atomic file output: write to a temporary file beside the target, then rename."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

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
