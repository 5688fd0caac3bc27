"""Checkpoints of the learned scheduler: a folder with one weights file per level (`upper.npz`,
`lower.npz`) and `meta.json` (format, feature version, network sizes, training networks and
settings, the command that made it, arsched version).

Every file is written atomically and `meta.json` last, so a folder whose `meta.json` exists is
complete. Weights are numpy archives of plain float32 arrays, named as the torch modules name
them, written with a fixed timestamp (the same weights give the same bytes) and read without
pickles and without torch (`forward.Frozen` runs them); an archive larger, packed or unpacked,
than the arrays `meta.json`'s sizes call for is refused before its arrays are read, and one
whose arrays do not have those shapes before it runs.
"""

from __future__ import annotations

import io
import json
import reprlib
import zipfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from arsched.errors import ArschedError
from arsched.fileio import parse_json, read_text, write_atomic
from arsched.rl import episode as ep
from arsched.rl.config import MAX_HIDDEN, MAX_LAYERS
from arsched.rl.forward import Frozen, Weights, shapes

if TYPE_CHECKING:
    from arsched.rl.nets import Policy

FORMAT = "arsched.hrl/4"
FEATURE_VERSION = 6  # bump whenever a feature of arsched.rl.episode changes
LEVELS = ("upper", "lower")
META = "meta.json"
DEFAULT = Path(__file__).resolve().parent / "checkpoints" / "default"
MAX_META_BYTES = 1_000_000  # a meta.json is a few kB


def arsched_version() -> str:
    try:
        return version("arsched")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


def _archive(weights: Weights) -> bytes:
    """The arrays as an .npz archive with a fixed timestamp."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name in sorted(weights):
            with z.open(zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0)), "w") as f:
                np.lib.format.write_array(f, np.ascontiguousarray(weights[name], dtype=np.float32))
    return buf.getvalue()


def save(folder: Path, policy: Policy | Frozen, meta: dict[str, Any]) -> None:
    """Write both networks' weights, then `meta.json`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    frozen = policy.frozen()
    for level in LEVELS:
        write_atomic(folder / f"{level}.npz", _archive(getattr(frozen, level)))
    full = {
        "format": FORMAT,
        "feature_version": FEATURE_VERSION,
        "features": {"option": ep.OPTION_FEATURES, "tree": ep.TREE_FEATURES, "flow": ep.FLOW_FEATURES},
        "arsched_version": arsched_version(),
        **meta,
    }
    write_atomic(folder / META, json.dumps(full, indent=2) + "\n")


def read_meta(folder: Path) -> dict[str, Any]:
    """The checkpoint's metadata; one clear error if the folder is not a usable checkpoint."""
    path = Path(folder) / META
    if not path.is_file():
        raise ArschedError(
            f"{folder} is not an hrl checkpoint: it has no {META} (make one with arsched train)"
        )
    if path.stat().st_size > MAX_META_BYTES:
        raise ArschedError(f"{path} has {path.stat().st_size} bytes, more than a {META}'s {MAX_META_BYTES}")
    meta = parse_json(read_text(path, "checkpoint file"), str(path))
    if not isinstance(meta, dict):
        raise ArschedError(f"{path} holds a JSON {type(meta).__name__}, not the object of an hrl checkpoint")
    if meta.get("format") != FORMAT:
        raise ArschedError(
            f"{path} has format {reprlib.repr(meta.get('format'))}, expected {FORMAT!r}: "
            "retrain it with arsched train"
        )
    if meta.get("feature_version") != FEATURE_VERSION:
        raise ArschedError(
            f"{folder} was trained on feature version {reprlib.repr(meta.get('feature_version'))}, this "
            f"arsched computes version {FEATURE_VERSION}: retrain it with arsched train"
        )
    for key, top in (("hidden", MAX_HIDDEN), ("layers", MAX_LAYERS)):
        value = meta.get(key)
        if not (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= top):
            raise ArschedError(
                f"{path}: {key} must be a whole number from 1 to {top}, got {reprlib.repr(value)}"
            )
    t = meta.get("temperature")
    if not (isinstance(t, int | float) and not isinstance(t, bool) and 0 < t <= 1):
        raise ArschedError(f"{path}: temperature must be a number in (0, 1], got {reprlib.repr(t)}")
    x = meta.get("explore")
    if not (isinstance(x, int | float) and not isinstance(x, bool) and 0 <= x < 1):
        raise ArschedError(f"{path}: explore must be a number in [0, 1), got {reprlib.repr(x)}")
    return meta


def _load(path: Path, expected: dict[str, tuple[int, ...]]) -> Weights:
    """The arrays of one level's archive, each of its `expected` shape; one sentence if not."""
    if not path.is_file():
        raise ArschedError(f"checkpoint file {path} is missing")
    room = 4096 + sum(4 * int(np.prod(shape)) + 1024 for shape in expected.values())  # data and headers
    if path.stat().st_size > room:
        raise ArschedError(f"{path} does not fit the network {META} describes: {path.stat().st_size} bytes")
    try:
        with zipfile.ZipFile(path) as z:
            if sum(i.file_size for i in z.infolist()) > room:
                raise ArschedError(f"{path} does not fit the network {META} describes")
        with np.load(path, allow_pickle=False) as archive:
            weights = {name: archive[name] for name in archive.files}
    except ArschedError:
        raise
    except Exception as e:  # a truncated or foreign file: one sentence, not a traceback
        raise ArschedError(f"cannot read checkpoint file {path}: {type(e).__name__}") from None
    if {k: v.shape for k, v in weights.items()} != expected or any(
        v.dtype != np.float32 for v in weights.values()
    ):
        raise ArschedError(f"{path} does not fit the network {META} describes")
    return weights


def load_policy(folder: Path) -> tuple[Frozen, dict[str, Any]]:
    """The trained networks' weights, ready to run (`forward.Frozen`), and the metadata."""
    meta = read_meta(folder)
    expected = shapes(meta["hidden"], meta["layers"])
    upper, lower = (_load(Path(folder) / f"{level}.npz", expected[level]) for level in LEVELS)
    return Frozen(upper, lower, meta["layers"], float(meta["temperature"]), float(meta["explore"])), meta
