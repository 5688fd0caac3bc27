"""Checkpoints of the hierarchical scheduler: a folder with one weights file per level, the
optimiser states (for resuming) and `meta.json` (format, feature version, topologies, arsched
version, training progress).

Every file is written atomically and `meta.json` last, so a folder whose `meta.json` exists is
complete. Weights are plain tensor dicts read with `torch.load(weights_only=True)`: loading a
checkpoint never runs pickled code.
"""

from __future__ import annotations

import io
import json
import reprlib
from importlib.metadata import PackageNotFoundError, version
from itertools import pairwise
from pathlib import Path
from typing import Any

import torch

from arsched.errors import ArschedError
from arsched.fileio import parse_json, read_text, write_atomic
from arsched.rl import features as ft
from arsched.rl.config import LEVELS, NET_ARCH
from arsched.rl.policy import make_policy

FORMAT = "arsched.hrl/1"
META = "meta.json"
DEFAULT = Path(__file__).resolve().parent / "checkpoints" / "default"
MAX_META_BYTES = 1_000_000  # a meta.json is a few kB
MAX_LAYERS = 32  # hidden layers of a network
MAX_WEIGHTS = 50_000_000  # weights of a network's hidden layers (its input layer counted as the widest)


def arsched_version() -> str:
    try:
        return version("arsched")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


def _tensor_bytes(obj: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def save(folder: Path, policies: dict, optimizers: dict | None, meta: dict[str, Any]) -> None:
    """Write the policies' weights (and optimiser states, if given), then `meta.json`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for level in LEVELS:
        write_atomic(folder / f"{level}.pt", _tensor_bytes(policies[level].state_dict()))
        if optimizers is not None:
            write_atomic(folder / f"{level}.optim.pt", _tensor_bytes(optimizers[level].state_dict()))
    full = {
        "format": FORMAT,
        "feature_version": ft.FEATURE_VERSION,
        "max_candidates": ft.MAX_CANDIDATES,
        "max_trees": ft.MAX_TREES,
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
        raise ArschedError(f"{path} has format {meta.get('format')!r}, expected {FORMAT!r}")
    if meta.get("feature_version") != ft.FEATURE_VERSION:
        raise ArschedError(
            f"{folder} was trained on feature version {meta.get('feature_version')}, this arsched "
            f"computes version {ft.FEATURE_VERSION}: retrain it with arsched train"
        )
    check_net_arch(meta.get("net_arch", list(NET_ARCH)), f"{path}: net_arch")
    return meta


def check_net_arch(widths: Any, source: str = "net_arch") -> tuple[int, ...]:
    """Hidden layer widths that make a network of a sensible size, as a tuple; `source` names
    where they come from in the error. Checked before any weight is allocated."""
    if not (
        isinstance(widths, list | tuple)
        and 1 <= len(widths) <= MAX_LAYERS
        and all(isinstance(w, int) and not isinstance(w, bool) and w >= 1 for w in widths)
    ):
        raise ArschedError(
            f"{source} must be 1 to {MAX_LAYERS} positive whole layer widths, got {reprlib.repr(widths)}"
        )
    dims = (max(ft.LOWER_DIM, ft.UPPER_DIM), *widths)
    weights = sum(a * b for a, b in pairwise(dims))
    if weights > MAX_WEIGHTS:
        raise ArschedError(
            f"{source} {reprlib.repr(list(widths))} makes layers of {weights:,} weights, more than the "
            f"{MAX_WEIGHTS:,} a network of hrl may have"
        )
    return tuple(widths)


def _load_tensors(path: Path) -> dict:
    if not path.is_file():
        raise ArschedError(f"checkpoint file {path} is missing")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # a truncated or foreign file: one sentence, not a traceback
        raise ArschedError(f"cannot read checkpoint file {path}: {type(e).__name__}") from None


def load_policies(folder: Path) -> tuple[dict, dict[str, Any]]:
    """Both levels' policies with their trained weights, and the metadata."""
    meta = read_meta(folder)
    policies = {}
    for level in LEVELS:
        policy = make_policy(level, meta.get("net_arch", NET_ARCH))
        try:
            policy.load_state_dict(_load_tensors(Path(folder) / f"{level}.pt"))
        except RuntimeError:
            raise ArschedError(f"{folder}/{level}.pt does not fit the network {META} describes") from None
        policy.set_training_mode(False)
        policies[level] = policy
    return policies, meta


def load_optimizer_states(folder: Path) -> dict[str, dict] | None:
    """The optimiser states for resuming, or None if the checkpoint has none."""
    paths = {level: Path(folder) / f"{level}.optim.pt" for level in LEVELS}
    if not all(p.is_file() for p in paths.values()):
        return None
    return {level: _load_tensors(p) for level, p in paths.items()}
