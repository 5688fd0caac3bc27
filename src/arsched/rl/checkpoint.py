"""Checkpoints of the learned scheduler: a folder with one weights file per level (`upper.pt`,
`lower.pt`) and `meta.json` (format, feature version, network sizes, training networks and
settings, the command that made it, arsched version).

Every file is written atomically and `meta.json` last, so a folder whose `meta.json` exists is
complete. Weights are plain tensor dicts read with `torch.load(weights_only=True)`: loading a
checkpoint never runs pickled code.
"""

from __future__ import annotations

import io
import json
import reprlib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import torch

from arsched.errors import ArschedError
from arsched.fileio import parse_json, read_text, write_atomic
from arsched.rl import episode as ep
from arsched.rl.config import MAX_HIDDEN, MAX_LAYERS
from arsched.rl.rollout import Policy

FORMAT = "arsched.hrl/2"
FEATURE_VERSION = 4  # bump whenever a feature of arsched.rl.episode changes
LEVELS = ("upper", "lower")
META = "meta.json"
DEFAULT = Path(__file__).resolve().parent / "checkpoints" / "default"
MAX_META_BYTES = 1_000_000  # a meta.json is a few kB


def arsched_version() -> str:
    try:
        return version("arsched")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


def _tensor_bytes(obj: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def save(folder: Path, policy: Policy, meta: dict[str, Any]) -> None:
    """Write both networks' weights, then `meta.json`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for level, weights in policy.state().items():
        write_atomic(folder / f"{level}.pt", _tensor_bytes(weights))
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
    return meta


def _load_tensors(path: Path) -> dict:
    if not path.is_file():
        raise ArschedError(f"checkpoint file {path} is missing")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # a truncated or foreign file: one sentence, not a traceback
        raise ArschedError(f"cannot read checkpoint file {path}: {type(e).__name__}") from None


def load_policy(folder: Path) -> tuple[Policy, dict[str, Any]]:
    """The trained networks (in evaluation mode) and the metadata."""
    meta = read_meta(folder)
    policy = Policy.create(meta["hidden"], meta["layers"], float(meta["temperature"]))
    for level in LEVELS:
        try:
            getattr(policy, level).load_state_dict(_load_tensors(Path(folder) / f"{level}.pt"))
        except (RuntimeError, TypeError, AttributeError):
            raise ArschedError(f"{folder}/{level}.pt does not fit the network {META} describes") from None
        getattr(policy, level).eval()
    return policy, meta
