"""Topology files: the JSON `topology` object of arsched.schedule/1, GraphML, and host lists.

A host list is a CSV with columns `ip,DSW,PSW,ASW` (one row per host, like the Alibaba Lingjun
2023 production cluster): it becomes a 3-tier Clos of host - ASW (ToR) - PSW (aggregation) -
DSW (core), with every distinct ASW-PSW and PSW-DSW pair in the file cabled once.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arsched.errors import TopologyError
from arsched.fileio import check_input, parse_json, read_text, write_atomic
from arsched.topology.core import DEFAULT_BANDWIDTH, DEFAULT_LATENCY, Link, Topology, per_level

if TYPE_CHECKING:
    import networkx as nx

HOSTLIST_COLUMNS = ("ip", "DSW", "PSW", "ASW")


def to_dict(topology: Topology) -> dict[str, Any]:
    """The `topology` object of the schedule format: name, nodes (id, kind), links, and the
    spread order where the topology has one (`Topology.spread_order`)."""
    out: dict[str, Any] = {
        "name": topology.name,
        "nodes": [{"id": n, "kind": topology.kind(n)} for n in topology.nodes],
        "links": [
            {"src": lk.src, "dst": lk.dst, "bandwidth": float(lk.bandwidth), "latency": float(lk.latency)}
            for lk in topology.links
        ],
    }
    if topology.spread_order:
        out["spread_order"] = list(topology.spread_order)
    return out


def from_dict(obj: Any, where: str = "topology") -> Topology:
    """A topology from the JSON `topology` object; a TopologyError naming what is malformed."""
    if not isinstance(obj, dict):
        raise TopologyError(f"{where} must be a JSON object with name, nodes and links")
    for key in ("nodes", "links"):
        if not isinstance(obj.get(key), list):
            raise TopologyError(f"{where} has no '{key}' list")
    try:
        nodes = [(n["id"], n["kind"]) for n in obj["nodes"]]
    except (TypeError, KeyError):
        raise TopologyError(f"every node in {where} needs an 'id' and a 'kind'") from None
    try:
        links = [
            Link(lk["src"], lk["dst"], float(lk["bandwidth"]), float(lk["latency"])) for lk in obj["links"]
        ]
    except OverflowError:
        raise TopologyError(
            f"a link in {where} has a bandwidth or latency beyond a float (1.8e308)"
        ) from None
    except (TypeError, KeyError, ValueError):
        raise TopologyError(
            f"every link in {where} needs 'src', 'dst', a numeric 'bandwidth' and 'latency'"
        ) from None
    order = obj.get("spread_order", [])
    if not (isinstance(order, list) and all(isinstance(x, str) for x in order)):
        raise TopologyError(f"'spread_order' in {where} must be a list of server ids")
    return Topology(str(obj.get("name", "topology")), nodes, links, order)


def hostlist(
    rows: Sequence[dict[str, str]],
    name: str = "clos",
    bandwidth: float | Sequence[float] = DEFAULT_BANDWIDTH,
    latency: float | Sequence[float] = DEFAULT_LATENCY,
) -> Topology:
    """A 3-tier Clos from host rows with keys ip, DSW, PSW, ASW.

    Hosts keep their `ip` as id; switches become `asw_X`, `psw_X`, `dsw_X`. Levels: 0 host-ASW,
    1 ASW-PSW, 2 PSW-DSW.
    """
    bws = per_level(bandwidth, 3, "bandwidth", name)
    lats = per_level(latency, 3, "latency", name)
    hosts: dict[str, str] = {}
    tiers: list[dict[tuple[str, str], None]] = [{}, {}, {}]
    for i, row in enumerate(rows, start=2):
        vals = [str(row.get(c) or "").strip() for c in HOSTLIST_COLUMNS]
        if not all(vals):
            raise TopologyError(f"row {i} of host list {name} has an empty {HOSTLIST_COLUMNS} field")
        ip, dsw, psw, asw = vals
        asw_id, psw_id, dsw_id = f"asw_{asw}", f"psw_{psw}", f"dsw_{dsw}"
        if hosts.setdefault(ip, asw_id) != asw_id:
            raise TopologyError(f"host {ip} appears under two ToR switches in host list {name}")
        tiers[0][(ip, asw_id)] = None
        tiers[1][(asw_id, psw_id)] = None
        tiers[2][(psw_id, dsw_id)] = None
    if len(hosts) < 2:
        raise TopologyError(f"host list {name} has fewer than two hosts")
    switches = list(dict.fromkeys(s for lvl in (1, 2) for pair in tiers[lvl] for s in pair))
    cables = [(u, v, bws[lvl], lats[lvl]) for lvl in range(3) for u, v in tiers[lvl]]
    return Topology.from_cables(name, list(hosts), switches, cables)


def _read_hostlist(path: Path, bandwidth: Any, latency: Any) -> Topology:
    reader = csv.DictReader(io.StringIO(read_text(path, "host list", TopologyError)))
    try:
        fields = reader.fieldnames or []
        rows = list(reader)
    except csv.Error as e:  # a field over csv.field_size_limit(), a NUL byte, ...
        raise TopologyError(f"host list {path} is not readable CSV ({e})") from None
    missing = [c for c in HOSTLIST_COLUMNS if c not in fields]
    if missing:
        raise TopologyError(
            f"{path} is not a host list: it lacks column(s) {', '.join(missing)} "
            f"(expected {','.join(HOSTLIST_COLUMNS)})"
        )
    return hostlist(rows, name=path.stem, bandwidth=bandwidth, latency=latency)


def _read_graphml(path: Path) -> nx.Graph:
    """The graph of a GraphML file, parsed by defusedxml first: a DTD (the carrier of entity
    expansion and external entities) is refused with one sentence; GraphML needs none."""
    import networkx as nx
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import ParseError, fromstring

    try:
        data = path.read_bytes()
    except OSError as e:
        raise TopologyError(f"cannot read GraphML file {path} ({e.strerror or e})") from None
    try:
        fromstring(data, forbid_dtd=True)
    except DefusedXmlException:
        raise TopologyError(
            f"{path} declares a DTD (<!DOCTYPE ...>), which arsched refuses: GraphML needs none, "
            "and one can expand entities without bound or read other files"
        ) from None
    except ParseError as e:
        raise TopologyError(f"{path} is not well-formed XML ({e})") from None
    try:  # the standard parser again, safe now that there is no DTD
        return nx.read_graphml(io.BytesIO(data))
    except Exception as e:  # networkx raises several parser types
        raise TopologyError(f"{path} is not readable GraphML ({e})") from None


def load(
    path: str | os.PathLike,
    bandwidth: float | Sequence[float] = DEFAULT_BANDWIDTH,
    latency: float | Sequence[float] = DEFAULT_LATENCY,
) -> Topology:
    """Read a topology from .json (a topology object or a schedule), .graphml or a .csv host list.

    `bandwidth`/`latency` apply where the file carries none (host lists, bare GraphML edges).
    Bandwidths are bytes/s, finite and at least `arsched.topology.core.MIN_BANDWIDTH` (2.2e-308,
    the smallest normal float: over a subnormal one even a few bytes take longer than a float
    holds); a link below it is refused with a sentence naming the link and the value.
    """
    p = check_input(path, "topology file", TopologyError)
    suffix = p.suffix.lower()
    if suffix == ".json":
        obj = parse_json(read_text(p, "topology file", TopologyError), str(p), TopologyError)
        if isinstance(obj, dict) and isinstance(obj.get("topology"), dict):
            obj = obj["topology"]
        return from_dict(obj, where=str(p))
    if suffix in (".graphml", ".xml"):
        g = _read_graphml(p)
        scalar_bw = bandwidth if isinstance(bandwidth, (int, float)) else DEFAULT_BANDWIDTH
        scalar_lat = latency if isinstance(latency, (int, float)) else DEFAULT_LATENCY
        return Topology.from_networkx(
            g, name=g.graph.get("name") or p.stem, bandwidth=scalar_bw, latency=scalar_lat
        )
    if suffix == ".csv":
        return _read_hostlist(p, bandwidth, latency)
    raise TopologyError(f"cannot tell the format of {p}: use .json, .graphml or a .csv host list")


def save(topology: Topology, path: str | os.PathLike) -> None:
    """Write a topology as .json (the schedule format's topology object) or .graphml, atomically."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".json":
        write_atomic(p, json.dumps(to_dict(topology), indent=1) + "\n")
    elif suffix in (".graphml", ".xml"):
        import networkx as nx

        buf = io.BytesIO()
        nx.write_graphml(topology.to_networkx(), buf)
        write_atomic(p, buf.getvalue())
    else:
        raise TopologyError(f"cannot write topology to {p}: use a .json or .graphml file name")
