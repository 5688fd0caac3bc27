"""The `arsched.schedule/1` JSON format (design §3.4): self-contained and byte-identical.

Keys come in the fixed order of the format; the topology travels inside the file and every
path is written out, so a reader needs no arsched. One node, link or transfer per line keeps
large files diffable; the transfer lines are formatted directly (not through json.dumps per
row) because schedules of millions of transfers are common.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from arsched.collective.kinds import NAMES
from arsched.collective.schedule import MAX_CHANNELS, OPS, Schedule
from arsched.errors import ScheduleFormatError, TopologyError
from arsched.fileio import parse_json, read_text, write_atomic
from arsched.topology.io import from_dict, to_dict

FORMAT = "arsched.schedule/1"
INT64_MAX = 2**63 - 1  # steps, chunks and num_chunks are stored as int64


def _number(x: float) -> int | float:
    """Integral values as integers (bytes), others as floats, for stable output."""
    return int(x) if float(x).is_integer() else float(x)


def _lines(items: list[Any], indent: str) -> str:
    if not items:
        return "[]"
    return "[\n" + ",\n".join(indent + json.dumps(x) for x in items) + "\n" + indent[:-1] + "]"


def dumps(schedule: Schedule) -> str:
    """The schedule as arsched.schedule/1 JSON text."""
    s = schedule
    topo = to_dict(s.topology)
    ids = s.topology.compiled.node_ids
    names = [json.dumps(n) for n in ids]
    paths = [json.dumps(list(p)) for p in s.paths]
    ops = [json.dumps(o) for o in OPS]
    rows = np.stack([s.step, s.chunk, s.src, s.dst, s.op, s.path_id], axis=1).tolist()
    transfers = ",\n".join(
        f'  {{"step": {st}, "chunk": {ch}, "src": {names[a]}, "dst": {names[b]}, '
        f'"op": {ops[o]}, "path": {paths[p]}}}'
        for st, ch, a, b, o, p in rows
    )
    parts = [
        f'"format": {json.dumps(FORMAT)}',
        f'"collective": {json.dumps(s.collective)}',
        *([f'"root": {json.dumps(s.root)}'] if s.root is not None else []),
        *([f'"channels": {s.channels}'] if s.channels != 1 else []),
        f'"algorithm": {json.dumps(s.algorithm)}',
        '"topology": {'
        + f'"name": {json.dumps(topo["name"])},\n'
        + f'  "nodes": {_lines(topo["nodes"], "   ")},\n'
        + f'  "links": {_lines(topo["links"], "   ")}}}',
        f'"ranks": {json.dumps(list(s.ranks))}',
        f'"num_chunks": {int(s.num_chunks)}',
        f'"bytes": {json.dumps(_number(s.nbytes))}',
        '"transfers": ' + (f"[\n{transfers}\n ]" if len(s) else "[]"),
        f'"meta": {json.dumps(s.meta, sort_keys=True)}',
    ]
    return "{" + ",\n ".join(parts) + "}\n"


def loads(text: str, where: str = "schedule") -> Schedule:
    """A Schedule from arsched.schedule/1 JSON text; ScheduleFormatError if it is malformed."""
    return from_obj(parse_json(text, where, ScheduleFormatError), where)


def from_obj(obj: Any, where: str = "schedule") -> Schedule:
    """A Schedule from the parsed JSON object of the format."""
    if not isinstance(obj, dict):
        raise ScheduleFormatError(f"{where} must be a JSON object")
    if obj.get("format") != FORMAT:
        raise ScheduleFormatError(f"{where} has format {obj.get('format')!r}; expected {FORMAT!r}")
    collective, root = obj.get("collective", "allreduce"), obj.get("root")
    if collective not in NAMES:
        raise ScheduleFormatError(
            f"{where} has collective {collective!r}; it must be one of {', '.join(NAMES)}"
        )
    if not (root is None or isinstance(root, str)):
        raise ScheduleFormatError(f"{where} has a root that is not a node id string")
    channels = obj.get("channels", 1)
    if type(channels) is not int or not 1 <= channels <= MAX_CHANNELS:
        raise ScheduleFormatError(f"{where} has {channels!r} channels; it needs 1 to {MAX_CHANNELS}")
    for key, kind in (("topology", dict), ("ranks", list), ("transfers", list)):
        if not isinstance(obj.get(key), kind):
            raise ScheduleFormatError(f"{where} has no {key!r} {kind.__name__.replace('dict', 'object')}")
    for key in ("num_chunks", "bytes"):
        if not isinstance(obj.get(key), (int, float)) or isinstance(obj.get(key), bool):
            raise ScheduleFormatError(f"{where} needs a numeric {key!r}")
    nbytes, num_chunks = _float(obj["bytes"], "bytes", where), _float(obj["num_chunks"], "num_chunks", where)
    if not num_chunks.is_integer():
        raise ScheduleFormatError(f"{where} has a non-integer num_chunks {obj['num_chunks']}")
    count = obj["num_chunks"] if isinstance(obj["num_chunks"], int) else int(num_chunks)
    if count > INT64_MAX:
        raise ScheduleFormatError(
            f"{where} has num_chunks {_show(obj['num_chunks'])}, more than the largest {INT64_MAX}"
        )
    try:
        topology = from_dict(obj["topology"], where=f"the topology of {where}")
    except TopologyError as e:
        raise ScheduleFormatError(str(e)) from None
    if not all(isinstance(r, str) for r in obj["ranks"]):
        raise ScheduleFormatError(f"the ranks of {where} must be node id strings")
    meta = obj.get("meta", {})
    index = topology.compiled.index
    op_code = {op: k for k, op in enumerate(OPS)}
    path_ids: dict[tuple[str, ...], int] = {}
    rows: list[tuple[int, ...]] = []
    for i, t in enumerate(obj["transfers"]):
        if isinstance(t, dict) and not isinstance(t.get("path"), list):
            raise ScheduleFormatError(f"transfer {i} of {where} has a 'path' that is not a list of node ids")
        try:
            row = (
                t["step"],
                t["chunk"],
                index[t["src"]],
                index[t["dst"]],
                op_code[t["op"]],
                path_ids.setdefault(tuple(t["path"]), len(path_ids)),
            )
        except (KeyError, TypeError):
            raise ScheduleFormatError(_row_problem(t, i, where, index)) from None
        if not all(type(v) is int for v in row[:2]):
            raise ScheduleFormatError(f"transfer {i} of {where} needs integer 'step' and 'chunk'")
        rows.append(row)
    bad_paths = {p for p in path_ids if not all(isinstance(node, str) for node in p)}
    if bad_paths:
        i = next(i for i, t in enumerate(obj["transfers"]) if tuple(t["path"]) in bad_paths)
        raise ScheduleFormatError(f"transfer {i} of {where} has a path that is not a list of node ids")
    try:
        cols = np.array(rows, dtype=np.int64).reshape(len(rows), 6).T
    except OverflowError:
        i, key, v = next(
            (i, key, r[k])
            for i, r in enumerate(rows)
            for k, key in enumerate(("step", "chunk"))
            if abs(r[k]) > INT64_MAX
        )
        raise ScheduleFormatError(
            f"transfer {i} of {where} has {key} {_show(v)}, beyond the int64 range (±{INT64_MAX})"
        ) from None
    return Schedule(
        topology,
        tuple(obj["ranks"]),
        nbytes,
        count,
        *cols,
        paths=tuple(path_ids),
        algorithm=str(obj.get("algorithm", "custom")),
        meta=meta if isinstance(meta, dict) else {},
        collective=collective,
        root=root,
        channels=channels,
    )


def _show(x: int | float) -> str:
    """A number for a message: in full up to 30 digits, else its magnitude."""
    text = str(x)
    return text if len(text) <= 30 else f"{'-' if x < 0 else ''}10^{len(text.lstrip('-')) - 1}"


def _float(x: int | float, key: str, where: str) -> float:
    """`x` as a float; a ScheduleFormatError if it is an integer too large for one."""
    try:
        return float(x)
    except OverflowError:
        raise ScheduleFormatError(
            f"{where} has {key} {_show(x)}, outside the range of a float (±1.8e308)"
        ) from None


def _row_problem(t: Any, i: int, where: str, index: dict[str, int]) -> str:
    """One sentence on why transfer i could not be read."""
    if not isinstance(t, dict):
        return f"transfer {i} of {where} is not a JSON object"
    for key in ("step", "chunk", "src", "dst", "op", "path"):
        if key not in t:
            return f"transfer {i} of {where} has no {key!r}"
    for key in ("src", "dst"):
        if not isinstance(t[key], str) or t[key] not in index:
            return f"transfer {i} of {where} names {key} {t[key]!r}, which is not a node of its topology"
    if t["op"] not in OPS:
        return f"transfer {i} of {where} has op {t['op']!r}; it must be 'reduce' or 'copy'"
    return f"transfer {i} of {where} has a path that is not a list of node ids"


def save_json(schedule: Schedule, path: str | os.PathLike) -> None:
    """Write the schedule's JSON atomically (temporary file, then rename)."""
    write_atomic(path, dumps(schedule))


def load_json(path: str | os.PathLike) -> Schedule:
    """Read a JSON schedule file; ScheduleFormatError with one sentence if it is missing or
    malformed."""
    return loads(read_text(path, "schedule file", ScheduleFormatError), where=str(path))
