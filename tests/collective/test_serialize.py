"""The arsched.schedule/1 JSON format (design §3.4): key order, self-contained, byte-identical,
atomic saves, and one-sentence errors for malformed files."""

from __future__ import annotations

import copy
import itertools
import json
import os
import random
import stat

import numpy as np
import pytest

from arsched.collective import FORMAT, Schedule, Transfer, dumps, load, loads, save, validate
from arsched.errors import ArschedError, ScheduleFormatError
from arsched.topology import parse_spec
from schedules import (
    bfs_route,
    make,
    ps_allreduce,
    recursive_doubling_allreduce,
    ring_allreduce,
    ring_transfers,
    topo,
)

TOP_KEYS = [
    "format",
    "collective",
    "algorithm",
    "topology",
    "ranks",
    "num_chunks",
    "bytes",
    "transfers",
    "meta",
]
TRANSFER_KEYS = ["step", "chunk", "src", "dst", "op", "path"]


def build(name: str) -> Schedule:
    """A few schedules that exercise the format: routes, meta, odd sizes, names, no transfers."""
    if name == "ring-bcube":
        t = topo("bcube:n=3,k=1")
        ranks = ("s4", "s0", "s8", "s3", "s5")
        return ring_allreduce(t, ranks, nbytes=1e8, chunks_per_rank=2, route=bfs_route(t))
    if name == "ps-dcell":
        s = ps_allreduce(topo("dcell:n=2,k=1"), ("s1", "s5", "s2"), nbytes=1234.5, num_chunks=3, ps="s5")
        s.meta = {"seed": 7, "params": {"z": [1, 2], "a": "b"}}
        return s
    if name == "rd-torus":
        t = parse_spec("torus:dims=2x2x2,bandwidth=24Gbps/58.4Gbps/1Gbps,latency=1us/0.5us/3ns")
        s = recursive_doubling_allreduce(t, t.servers, nbytes=2**20, num_chunks=2)
        s.algorithm = 'doubling→π "quoted"'
        return s
    if name == "empty":
        return make(topo("star:n=3"), ("s0",), [], 1, 64)
    raise ValueError(name)


NAMES = ["ring-bcube", "ps-dcell", "rd-torus", "empty"]


@pytest.mark.parametrize("name", NAMES)
def test_round_trip_is_byte_identical(name):
    s = build(name)
    text = dumps(s)
    back = loads(text)
    assert dumps(back) == text
    assert back.topology == s.topology
    assert (back.ranks, back.nbytes, back.num_chunks, back.algorithm, back.meta) == (
        s.ranks,
        s.nbytes,
        s.num_chunks,
        s.algorithm,
        s.meta,
    )
    assert back.transfers == s.transfers
    for col in ("step", "chunk", "src", "dst", "op"):
        assert np.array_equal(getattr(back, col), getattr(s, col))
    assert validate(back).ok == validate(s).ok


@pytest.mark.parametrize("name", NAMES)
def test_key_order_and_paths_written_out(name):
    s = build(name)
    obj = json.loads(dumps(s), object_pairs_hook=dict)
    assert list(obj) == TOP_KEYS
    assert obj["format"] == FORMAT == "arsched.schedule/1"
    assert obj["collective"] == "allreduce"
    assert list(obj["topology"]) == ["name", "nodes", "links"]
    assert all(list(n) == ["id", "kind"] for n in obj["topology"]["nodes"])
    assert all(list(lk) == ["src", "dst", "bandwidth", "latency"] for lk in obj["topology"]["links"])
    assert len(obj["transfers"]) == len(s)
    for row, t in zip(obj["transfers"], s, strict=True):
        assert list(row) == TRANSFER_KEYS
        assert row["path"] == list(t.path) and len(row["path"]) >= 2
        assert (row["step"], row["chunk"], row["src"], row["dst"], row["op"]) == (
            t.step,
            t.chunk,
            t.src,
            t.dst,
            t.op,
        )
    assert obj["ranks"] == list(s.ranks) and obj["num_chunks"] == s.num_chunks and obj["bytes"] == s.nbytes


def test_integral_bytes_are_written_as_integers():
    obj = json.loads(dumps(build("ring-bcube")))
    assert obj["bytes"] == 100000000 and type(obj["bytes"]) is int
    assert json.loads(dumps(build("ps-dcell")))["bytes"] == 1234.5


# ---- a reader that needs no arsched ---------------------------------------------------------------


def interpret(text: str, seed: int = 0) -> bool:
    """Run a schedule file on random integers with plain json: True iff every path follows the
    file's links from src to dst and every rank ends with the sum of all ranks in every chunk."""
    doc = json.loads(text)
    kinds = {n["id"]: n["kind"] for n in doc["topology"]["nodes"]}
    links = {(lk["src"], lk["dst"]) for lk in doc["topology"]["links"]}
    ranks, chunks = doc["ranks"], doc["num_chunks"]
    if any(kinds.get(r) != "server" for r in ranks):
        return False
    rng = random.Random(seed)
    buf = {(r, c): rng.randrange(1, 10**12) for r in ranks for c in range(chunks)}
    total = [sum(buf[(r, c)] for r in ranks) for c in range(chunks)]
    steps: dict[int, list[dict]] = {}
    for t in doc["transfers"]:
        p = t["path"]
        if p[0] != t["src"] or p[-1] != t["dst"] or any(pair not in links for pair in itertools.pairwise(p)):
            return False
        steps.setdefault(t["step"], []).append(t)
    for step in sorted(steps):
        rows = steps[step]
        payload = [buf[(t["src"], t["chunk"])] for t in rows]  # everything read at the start
        for t, x in zip(rows, payload, strict=True):
            key = (t["dst"], t["chunk"])
            buf[key] = buf[key] + x if t["op"] == "reduce" else x
    return all(buf[(r, c)] == total[c] for r in ranks for c in range(chunks))


@pytest.mark.parametrize("name", ["ring-bcube", "ps-dcell", "rd-torus"])
def test_file_is_self_contained(name):
    text = dumps(build(name))
    assert interpret(text) and interpret(text, seed=1)


def test_independent_reader_rejects_broken_files():
    s = build("ring-bcube")
    obj = json.loads(dumps(s))
    dropped = copy.deepcopy(obj)
    del dropped["transfers"][len(s) // 2]
    twice = copy.deepcopy(obj)
    twice["transfers"].append(dict(obj["transfers"][0], step=10**6))
    rerouted = copy.deepcopy(obj)
    rerouted["transfers"][0]["path"] = [rerouted["transfers"][0]["src"], rerouted["transfers"][0]["dst"]]
    for bad in (dropped, twice, rerouted):
        assert not interpret(json.dumps(bad))


# ---- determinism and atomic files -----------------------------------------------------------------


def test_same_inputs_give_the_same_bytes(tmp_path):
    def fresh(meta):
        t = parse_spec("bcube:n=3,k=1")  # a new Topology object every time
        ranks = ("s2", "s7", "s1", "s4")
        return Schedule.from_transfers(t, ranks, 1e6, 4, ring_transfers(ranks), algorithm="ring", meta=meta)

    a, b = fresh({"b": 1, "a": {"y": 2, "x": 3}}), fresh({"a": {"x": 3, "y": 2}, "b": 1})
    assert dumps(a) == dumps(b)
    save(a, tmp_path / "a.json")
    save(b, tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert (tmp_path / "a.json").read_text(encoding="utf-8") == dumps(a)


def test_save_is_atomic_and_leaves_no_temporary_files(tmp_path, monkeypatch):
    target = tmp_path / "s.json"
    first, second = build("ps-dcell"), build("ring-bcube")
    save(first, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]
    save(second, target)  # replace an existing file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]
    assert target.read_text(encoding="utf-8") == dumps(second)
    assert dumps(load(target)) == dumps(second)

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        save(first, target)
    monkeypatch.undo()
    assert target.read_text(encoding="utf-8") == dumps(second)  # the old file, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]


def test_save_into_a_missing_folder_fails_and_writes_nothing(tmp_path):
    with pytest.raises((OSError, ArschedError)):
        save(build("empty"), tmp_path / "nope" / "s.json")
    assert list(tmp_path.iterdir()) == []


def test_saved_file_has_ordinary_permissions(tmp_path):
    plain = tmp_path / "plain.json"
    plain.write_text("{}", encoding="utf-8")
    save(build("empty"), tmp_path / "s.json")
    assert stat.S_IMODE((tmp_path / "s.json").stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)


# ---- malformed input -------------------------------------------------------------------------------


def _good() -> dict:
    return json.loads(dumps(build("ps-dcell")))


def _edit(fn):
    obj = _good()
    fn(obj)
    return json.dumps(obj)


MALFORMED = {
    "not JSON": ("{nope", ["not valid JSON"]),
    "truncated": (dumps(build("ps-dcell"))[:-40], ["not valid JSON"]),
    "not an object": ("[1, 2]", ["JSON object"]),
    "wrong format": (_edit(lambda o: o.update(format="arsched.schedule/2")), ["'arsched.schedule/2'"]),
    "no format": (_edit(lambda o: o.pop("format")), ["format"]),
    "unknown collective": (_edit(lambda o: o.update(collective="gather")), ["'gather'", "allgather"]),
    "collective not a string": (_edit(lambda o: o.update(collective=["allreduce"])), ["['allreduce']"]),
    "root not a string": (_edit(lambda o: o.update(collective="broadcast", root=3)), ["root"]),
    "missing topology": (_edit(lambda o: o.pop("topology")), ["'topology'"]),
    "missing ranks": (_edit(lambda o: o.pop("ranks")), ["'ranks'"]),
    "missing transfers": (_edit(lambda o: o.pop("transfers")), ["'transfers'"]),
    "transfers not a list": (_edit(lambda o: o.update(transfers={"a": 1})), ["'transfers'"]),
    "missing bytes": (_edit(lambda o: o.pop("bytes")), ["'bytes'"]),
    "fractional num_chunks": (_edit(lambda o: o.update(num_chunks=2.5)), ["num_chunks"]),
    "ranks not strings": (_edit(lambda o: o.update(ranks=[1, 2])), ["ranks"]),
    "bad topology node": (_edit(lambda o: o["topology"]["nodes"][0].pop("kind")), ["'kind'"]),
    "float step": (_edit(lambda o: o["transfers"][2].update(step=1.5)), ["transfer 2", "'step'"]),
    "string step": (_edit(lambda o: o["transfers"][2].update(step="1")), ["transfer 2", "'step'"]),
    "boolean chunk": (_edit(lambda o: o["transfers"][2].update(chunk=True)), ["transfer 2", "'chunk'"]),
    "unknown src": (_edit(lambda o: o["transfers"][1].update(src="s99")), ["transfer 1", "'s99'"]),
    "unknown dst": (_edit(lambda o: o["transfers"][1].update(dst="s99")), ["transfer 1", "'s99'"]),
    "bad op": (_edit(lambda o: o["transfers"][0].update(op="sum")), ["transfer 0", "'sum'"]),
    "missing path": (_edit(lambda o: o["transfers"][3].pop("path")), ["transfer 3", "'path'"]),
    "bytes past a float": (_edit(lambda o: o.update(bytes=10**400)), ["bytes 10^400", "range of a float"]),
    "num_chunks past int64": (
        _edit(lambda o: o.update(num_chunks=2**63)),
        ["num_chunks 9223372036854775808"],
    ),
    "num_chunks 1e300": (
        _edit(lambda o: o.update(num_chunks=1e300)),
        ["num_chunks 1e+300", "more than the largest"],
    ),
    "step past int64": (_edit(lambda o: o["transfers"][2].update(step=10**30)), ["transfer 2", "step 10^30"]),
    "chunk below int64": (
        _edit(lambda o: o["transfers"][5].update(chunk=-(10**30))),
        ["transfer 5", "-10^30"],
    ),
    "path of numbers": (_edit(lambda o: o["transfers"][3].update(path=[None, 1])), ["transfer 3", "path"]),
    "path of lists": (_edit(lambda o: o["transfers"][3].update(path=[["s1"], "s2"])), ["transfer 3", "path"]),
    "nested too deep": ("[" * 100_000 + "]" * 100_000, ["nests JSON", "too deeply"]),
    "transfer not an object": (
        _edit(lambda o: o["transfers"].__setitem__(4, [0, 0, "s1", "s5"])),
        ["transfer 4", "not a JSON object"],
    ),
}


@pytest.mark.parametrize(("text", "words"), list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_input_gives_one_sentence(text, words):
    with pytest.raises(ScheduleFormatError) as e:
        loads(text, where="sched.json")
    msg = str(e.value)
    assert msg and "\n" not in msg
    assert "sched.json" in msg
    for w in words:
        assert w in msg, msg


def test_path_given_as_a_string_is_rejected():
    with pytest.raises(ScheduleFormatError, match="path"):
        loads(_edit(lambda o: o["transfers"][0].update(path="s1w1s5")))


def test_load_errors_name_the_file(tmp_path):
    with pytest.raises(ScheduleFormatError, match="does not exist"):
        load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ScheduleFormatError) as e:
        load(bad)
    assert str(bad) in str(e.value) and "\n" not in str(e.value)
    good = tmp_path / "good.json"
    save(build("ring-bcube"), good)
    assert load(good).transfers == build("ring-bcube").transfers


def test_unknown_node_on_a_path_loads_and_is_left_to_the_validator():
    # the reader keeps the path as written; test_validate checks it is reported as missing-link
    text = _edit(lambda o: o["transfers"][0].update(path=[o["transfers"][0]["src"], "ghost", "s5"]))
    s = loads(text)
    assert s.transfer(0).path == ("s1", "ghost", "s5")


def test_transfer_rows_are_plain_json():
    s = Schedule.from_transfers(topo("star:n=3"), ["s0", "s1"], 8, 1, [Transfer(0, 0, "s1", "s0")])
    line = next(x for x in dumps(s).splitlines() if '"step"' in x)
    assert json.loads(line.strip().rstrip(",")) == {
        "step": 0,
        "chunk": 0,
        "src": "s1",
        "dst": "s0",
        "op": "reduce",
        "path": ["s1", "w0", "s0"],
    }
