"""`arsched.schedule/1` in columns: a compact binary twin of the JSON format, for big schedules.

A `.npz` file (a zip of numpy arrays, deflated) holding the same fields as the JSON: `header`,
the UTF-8 JSON of everything but the transfers and paths (format, collective, algorithm,
topology, ranks, num_chunks, bytes, meta); the transfer columns `step`, `chunk` (int64),
`src`, `dst` (int32, indices into the header's topology nodes), `op` (int8, 0 reduce, 1
copy), `path_id` (int32); and the path table as `path_ptr` (int64, path i is
`path_nodes[path_ptr[i]:path_ptr[i + 1]]`) and `path_nodes` (int32 node indices). A ring over
847 hosts (1.4 million transfers) is about 100 MB of JSON, whose reading builds a Python object
per transfer; here it is a few MB, read as arrays.

Written deterministically (fixed zip timestamps, arrays in a fixed order: the same schedule
gives the same bytes) and atomically; read without pickles (`allow_pickle=False`), each
member's declared size checked against the memory limit before it is inflated, and every
column checked for type, length and range, so a hostile file gets one sentence.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from typing import Any

import numpy as np

from arsched.collective.schedule import Schedule
from arsched.collective.serialize import FORMAT, from_obj
from arsched.errors import ScheduleFormatError
from arsched.fileio import check_input, parse_json, write_atomic
from arsched.limits import check_memory, format_bytes
from arsched.topology.io import to_dict

SUFFIX = ".npz"
COLUMNS = {  # name: dtype
    "step": np.int64,
    "chunk": np.int64,
    "src": np.int32,
    "dst": np.int32,
    "op": np.int8,
    "path_id": np.int32,
    "path_ptr": np.int64,
    "path_nodes": np.int32,
}
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the zip format's earliest date: no clock in the bytes


def dumps_columnar(schedule: Schedule) -> bytes:
    """The schedule as the bytes of a columnar `.npz` file."""
    s = schedule
    header = {
        "format": FORMAT,
        "encoding": "columnar",
        "collective": s.collective,
        **({"root": s.root} if s.root is not None else {}),
        **({"channels": s.channels} if s.channels != 1 else {}),
        "algorithm": s.algorithm,
        "topology": to_dict(s.topology),
        "ranks": list(s.ranks),
        "num_chunks": int(s.num_chunks),
        "bytes": s.nbytes,
        "meta": s.meta,
    }
    index = s.topology.compiled.index
    lens = np.array([len(p) for p in s.paths], dtype=np.int64)
    arrays = {
        "header": np.frombuffer(json.dumps(header, sort_keys=True).encode(), dtype=np.uint8),
        "step": s.step,
        "chunk": s.chunk,
        "src": s.src,
        "dst": s.dst,
        "op": s.op,
        "path_id": s.path_id,
        "path_ptr": np.concatenate([[0], np.cumsum(lens)]),
        "path_nodes": np.fromiter((index[v] for p in s.paths for v in p), np.int32, int(lens.sum())),
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for name, array in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            with z.open(info, "w", force_zip64=True) as f:
                dtype = np.uint8 if name == "header" else COLUMNS[name]
                np.lib.format.write_array(f, np.ascontiguousarray(array, dtype=dtype), allow_pickle=False)
    return buffer.getvalue()


def save_columnar(schedule: Schedule, path: str | os.PathLike) -> None:
    """Write the schedule as a columnar `.npz` file, atomically (temporary file, then rename)."""
    write_atomic(path, dumps_columnar(schedule))


def load_columnar(path: str | os.PathLike) -> Schedule:
    """Read a columnar `.npz` schedule; ScheduleFormatError with one sentence if it is malformed."""
    where = str(path)
    p = check_input(path, "schedule file", ScheduleFormatError)
    try:
        with zipfile.ZipFile(p) as z:
            arrays = _members(z, where)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as e:
        raise ScheduleFormatError(f"{where} is not a readable .npz schedule ({e})") from None
    try:
        text = arrays["header"].tobytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ScheduleFormatError(f"the header of {where} is not UTF-8 JSON") from None
    header = parse_json(text, f"the header of {where}", ScheduleFormatError)
    if not isinstance(header, dict) or header.get("encoding") != "columnar":
        raise ScheduleFormatError(f"the header of {where} is not a columnar arsched.schedule/1 header")
    skeleton = from_obj({**header, "transfers": []}, where)  # checks everything but the columns
    return _with_columns(skeleton, arrays, where)


def _members(z: zipfile.ZipFile, where: str) -> dict[str, np.ndarray]:
    """The arrays of the zip, each checked for its declared size, name and dtype."""
    infos = {i.filename: i for i in z.infolist()}
    expected = {f"{name}.npy" for name in (*COLUMNS, "header")}
    if set(infos) != expected:
        missing = sorted(expected - set(infos)) or sorted(set(infos) - expected)
        raise ScheduleFormatError(f"{where} does not hold exactly the format's columns (see {missing[0]})")
    declared = sum(i.file_size for i in infos.values())
    check_memory(f"{where} would unpack to {format_bytes(declared)}", 2 * declared)
    out = {}
    for name in (*COLUMNS, "header"):
        with z.open(infos[f"{name}.npy"]) as f:
            try:
                array = np.lib.format.read_array(f, allow_pickle=False)
            except (ValueError, OSError, EOFError) as e:
                raise ScheduleFormatError(f"column {name!r} of {where} cannot be read ({e})") from None
        want = np.uint8 if name == "header" else COLUMNS[name]
        if array.dtype != np.dtype(want) or array.ndim != 1:
            raise ScheduleFormatError(
                f"column {name!r} of {where} must be one-dimensional {np.dtype(want).name}, got "
                f"{array.ndim}-dimensional {array.dtype}"
            )
        out[name] = array
    return out


def _with_columns(skeleton: Schedule, a: dict[str, np.ndarray], where: str) -> Schedule:
    """The skeleton's schedule with the transfer columns and path table of `a`, checked."""
    n = len(a["step"])
    nodes = skeleton.topology.compiled.num_nodes
    if any(len(a[c]) != n for c in ("chunk", "src", "dst", "op", "path_id")):
        raise ScheduleFormatError(f"the transfer columns of {where} differ in length")
    ptr, path_nodes = a["path_ptr"], a["path_nodes"]
    if not len(ptr) or ptr[0] != 0 or ptr[-1] != len(path_nodes) or (np.diff(ptr) < 0).any():
        raise ScheduleFormatError(f"the path table of {where} is inconsistent (path_ptr)")
    for name in ("src", "dst", "path_nodes"):
        values = a[name]
        if len(values) and (values.min() < 0 or values.max() >= nodes):
            raise ScheduleFormatError(f"column {name!r} of {where} names a node outside its topology")
    ids = skeleton.topology.compiled.node_ids
    names = np.array(ids, dtype=object)[path_nodes] if len(path_nodes) else np.zeros(0, dtype=object)
    paths = tuple(tuple(names[ptr[i] : ptr[i + 1]].tolist()) for i in range(len(ptr) - 1))
    fields: dict[str, Any] = {c: a[c] for c in ("step", "chunk", "src", "dst", "op", "path_id")}
    return Schedule(
        skeleton.topology,
        skeleton.ranks,
        skeleton.nbytes,
        skeleton.num_chunks,
        **fields,
        paths=paths,
        algorithm=skeleton.algorithm,
        meta=skeleton.meta,
        collective=skeleton.collective,
        root=skeleton.root,
        channels=skeleton.channels,
    )
