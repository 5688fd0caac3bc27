"""Topology specs for the command line and configs: 'bcube:n=4,k=1', 'torus:dims=4x4', or a file.

Every family takes `bandwidth` and `latency` too, one value for all levels or one per level
separated by '/', in human units: 'fattree:k=4,bandwidth=100Gbps/100Gbps/400Gbps,latency=1us'.
The GPU clusters (hgx, mi250) name their bandwidths instead (nvlink or xgmi, pcie, nic) and
take words (gen=h100, fabric=clos) and a ratio (oversub=2 or 2:1). Rings and tori may be
directed: 'torus:dims=3x3,oneway=1' keeps only the links in the + direction of every dimension,
'ring:n=8,bandwidth=400Gbps,reverse=100Gbps' gives the − direction its own bandwidth (per level
like `bandwidth`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from arsched.errors import TopologyError, UnitError
from arsched.topology.bcube import bcube
from arsched.topology.core import Topology
from arsched.topology.dcell import dcell
from arsched.topology.fattree import fattree
from arsched.topology.gpucluster import hgx, mi250
from arsched.topology.io import load
from arsched.topology.jellyfish import jellyfish
from arsched.topology.switched import leafspine, star
from arsched.topology.torus import ring, torus
from arsched.units import parse_bandwidth, parse_time

FAMILIES: dict[str, Callable[..., Topology]] = {
    "bcube": bcube,
    "dcell": dcell,
    "jellyfish": jellyfish,
    "fattree": fattree,
    "torus": torus,
    "ring": ring,
    "star": star,
    "leafspine": leafspine,
    "hgx": hgx,
    "mi250": mi250,
}

DIRECTED_EXAMPLES = ("torus:dims=3x3,oneway=1", "ring:n=8,bandwidth=400Gbps,reverse=100Gbps")
"""A one-way torus and an asymmetric ring: the directed forms of rings and tori."""

SPEC_EXAMPLES = (
    "bcube:n=4,k=1",
    "dcell:n=4,k=1",
    "jellyfish:switches=16,ports=4,net_ports=3,seed=1",
    "fattree:k=4",
    "torus:dims=4x4",
    "ring:n=8",
    "star:n=8",
    "leafspine:leaves=4,spines=2,servers_per_leaf=4",
    "hgx:boxes=2,gen=h100",
    "mi250:boxes=2",
    *DIRECTED_EXAMPLES,
)
"""One spec per family (the first of each is the one error messages suggest), then the directed
rings and tori."""

_RATES = ("nvlink", "xgmi", "pcie", "nic")  # one bandwidth each, in human units
_WORDS = ("gen", "fabric")
_SWITCHES = {"1": True, "0": False, "true": True, "false": False, "yes": True, "no": False}


def _levels(raw: str) -> list[str]:
    """Split per-level values on '/', keeping the '/s' of units such as 'GB/s' attached."""
    out: list[str] = []
    for part in raw.split("/"):
        if part == "s" and out:
            out[-1] += "/s"
        else:
            out.append(part)
    return out


def _convert(family: str, key: str, raw: str) -> Any:
    if key in ("bandwidth", "reverse"):
        vals = [parse_bandwidth(v) for v in _levels(raw)]
        return vals[0] if len(vals) == 1 else vals
    if key == "latency":
        vals = [parse_time(v) for v in raw.split("/")]
        return vals[0] if len(vals) == 1 else vals
    if key in _RATES:
        return parse_bandwidth(raw)
    if key in _WORDS:
        return raw.lower()
    if key == "oneway":
        if raw.lower() not in _SWITCHES:
            raise TopologyError(f"{family}: oneway must be 1 or 0 (or yes/no, true/false), got {raw!r}")
        return _SWITCHES[raw.lower()]
    if key == "oversub":
        return _ratio(family, raw)
    if key == "dims":
        parts = raw.lower().split("x")
        if not all(p.isdigit() for p in parts):
            raise TopologyError(f"{family}: dims must look like 4x4 or 8x8x8, got {raw!r}")
        return tuple(int(p) for p in parts)
    try:
        return int(raw)
    except ValueError:
        raise TopologyError(f"{family}: parameter {key} must be an integer, got {raw!r}") from None


def _ratio(family: str, raw: str) -> float:
    """An oversubscription written 3, 1.5 or 3:1."""
    top, colon, bottom = raw.partition(":")
    try:
        value = float(top) / (float(bottom) if colon else 1.0)
    except (ValueError, ZeroDivisionError):
        raise TopologyError(f"{family}: oversub must be a number such as 2 or 3:1, got {raw!r}") from None
    return value


def parse_spec(spec: str) -> Topology:
    """Build a topology from a spec string or load it from a file path."""
    spec = spec.strip()
    family, _, rest = spec.partition(":")
    if family not in FAMILIES:
        if spec and (Path(spec).is_file() or Path(spec).is_dir()):
            return load(spec)  # a folder gets its own sentence there
        raise TopologyError(
            f"{spec!r} is neither a topology family ({', '.join(FAMILIES)}) nor an existing file; "
            f"try e.g. {SPEC_EXAMPLES[0]}"
        )
    builder = FAMILIES[family]
    accepted = [p for p in inspect.signature(builder).parameters]
    params: dict[str, Any] = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, eq, raw = item.partition("=")
        key = key.strip()
        if not eq or not raw.strip():
            raise TopologyError(f"{family}: parameter {item!r} must be written key=value")
        if key not in accepted:
            raise TopologyError(f"{family} has no parameter {key!r}; it takes {', '.join(accepted)}")
        if key in params:
            raise TopologyError(f"{family}: parameter {key} is given twice in {spec!r}; give it once")
        try:
            params[key] = _convert(family, key, raw.strip())
        except UnitError as e:
            raise TopologyError(f"{family}: {e}") from None
    required = [
        p.name
        for p in inspect.signature(builder).parameters.values()
        if p.default is inspect.Parameter.empty and p.name not in params
    ]
    if required:
        example = next(e for e in SPEC_EXAMPLES if e.startswith(family + ":"))
        raise TopologyError(f"{family} needs {', '.join(required)}, e.g. {example}")
    return builder(**params)
