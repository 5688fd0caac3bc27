"""MSCCL XML: export a Schedule as an MSCCL algorithm file and import one back.

The MSCCL runtime (microsoft/msccl-executor-nccl) runs a collective written as XML: `<algo>`
holds one `<gpu>` per rank, each with thread blocks `<tb>` that execute their `<step>`s in
order. A thread block sends to at most one peer and receives from at most one; each (peer,
channel) is a connection that delivers in order. A step may first wait for a step of another
thread block of the same GPU (`depid` = that block, `deps` = its step); a step others wait for
is marked `hasdep="1"`; a step that must wait for several goes after `nop` steps that carry the
extra waits.

Export writes an in-place program on the input buffer `i` (no scratch): one thread block per
(rank, peer, direction), on channel 0 unless a rank has more than MSCCL's 32 thread blocks
per channel in one direction (then the next channel, the same at both ends). A transfer is a
send (`s`) at its source and a receive at its destination, `rrc` (receive, reduce, copy) for
`reduce` and `r` for `copy`, each thread block in step order. Waits follow the step
semantics (design §3.3): a send waits for the last write of its chunk; a receive waits for
the last write of its chunk (two thread blocks must never add into the same memory at once,
so writes are serialised) and for the sends that read the chunk since (they must send the old
value).

Import matches every connection's sends with its receives in order, builds the
happens-before order of the program (thread-block order, waits, send before receive), checks
that every two conflicting accesses to a chunk are ordered (otherwise the program has a race),
and gives each transfer the earliest step the step semantics allow. Input and output buffer
are read as one (in place); scratch buffers and moves between chunk positions have no
counterpart in the schedule IR and are refused with one sentence. `rrs` (receive, reduce,
send without storing) is read as `rrcs`: the partial sum stays in the local chunk.
"""

from __future__ import annotations

import itertools
import os
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import quoteattr

import numpy as np

from arsched.collective.schedule import COPY, Schedule, ScheduleBuilder
from arsched.collective.validate import validate
from arsched.errors import ArschedError
from arsched.fileio import write_atomic
from arsched.topology.core import Topology

PROTOCOLS = ("Simple", "LL", "LL128")
MAX_STEPS_PER_TB = 256  # MSCCL_MAX_NUM_STEPS: the interpreter's limit per thread block
MAX_TBS = 216  # MSCCL_MAX_NUM_THREAD_BLOCKS per gpu (two per A100 SM)
MAX_TBS_PER_CHANNEL = 32  # MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL, for sends and for receives
MAX_BYTES = 2**63 - 1  # "every size": the largest int64 the runtime reads for maxBytes

# step type -> (receives, reduces, sends); local ops and nop do none of these
STEP_TYPES = {
    "s": (False, False, True),
    "r": (True, False, False),
    "rrc": (True, True, False),
    "rcs": (True, False, True),
    "rrcs": (True, True, True),
    "rrs": (True, True, True),
    "cpy": (False, False, False),
    "re": (False, False, False),
    "nop": (False, False, False),
}


class MscclFormatError(ArschedError):
    """An MSCCL XML file is malformed or describes something a schedule cannot hold."""


# ---- export -----------------------------------------------------------------------------------


@dataclass
class _Op:
    """One send or receive of the exported program; `deps` are (thread block, op index)."""

    kind: str
    chunk: int
    deps: list[tuple[int, int]] = field(default_factory=list)


def _channels(src: np.ndarray, dst: np.ndarray) -> dict[tuple[int, int], int]:
    """A channel per connection (a -> b) such that no rank sends, nor receives, on more than
    MSCCL's 32 thread blocks per channel: the lowest channel with room at both ends."""
    used: dict[tuple[str, int, int], int] = defaultdict(int)  # (direction, rank, channel) -> blocks
    out = {}
    for a, b in sorted(set(zip(src.tolist(), dst.tolist(), strict=True))):
        ch = 0
        while used[("s", a, ch)] >= MAX_TBS_PER_CHANNEL or used[("r", b, ch)] >= MAX_TBS_PER_CHANNEL:
            ch += 1
        used[("s", a, ch)] += 1
        used[("r", b, ch)] += 1
        out[(a, b)] = ch
    return out


def _thread_blocks(chan: dict[tuple[int, int], int], n: int) -> list[dict[tuple[int, int, int], int]]:
    """Per rank: (send peer, recv peer, channel) -> thread block id, one block per peer and
    direction, sorted by (send, recv, channel) so that blocks on the same link sit together."""
    keys: list[set[tuple[int, int, int]]] = [set() for _ in range(n)]
    for (a, b), ch in chan.items():
        keys[a].add((b, -1, ch))
        keys[b].add((-1, a, ch))
    return [{k: i for i, k in enumerate(sorted(ks))} for ks in keys]


def _place_ops(s: Schedule, src: np.ndarray, dst: np.ndarray, tbs: list[dict], chan: dict) -> tuple:
    """The ops of every thread block in step order, and where each transfer's halves went."""
    ops: list[list[list[_Op]]] = [[[] for _ in t] for t in tbs]
    order = np.lexsort((np.arange(len(s)), s.step))
    send_at = np.zeros((len(s), 2), dtype=np.int64)  # (tb, index) at the source
    recv_at = np.zeros((len(s), 2), dtype=np.int64)
    for t in order.tolist():
        a, b, c = int(src[t]), int(dst[t]), int(s.chunk[t])
        tb = tbs[a][(b, -1, chan[(a, b)])]
        send_at[t] = tb, len(ops[a][tb])
        ops[a][tb].append(_Op("s", c))
        tb = tbs[b][(-1, a, chan[(a, b)])]
        recv_at[t] = tb, len(ops[b][tb])
        ops[b][tb].append(_Op("r" if s.op[t] == COPY else "rrc", c))
    return ops, order, send_at, recv_at


def _add_waits(s: Schedule, ops: list, order: np.ndarray, src, dst, send_at, recv_at) -> None:
    """Waits from the step semantics, per chunk buffer in (step, reads before writes) order."""
    n_ch = s.num_chunks
    pos = np.empty(len(s), dtype=np.int64)
    pos[order] = np.arange(len(s))
    # events: (buffer, step, phase, position, transfer); phase 0 = read (send), 1 = write (recv)
    buf = np.concatenate([src * n_ch + s.chunk, dst * n_ch + s.chunk])
    step = np.concatenate([s.step, s.step])
    phase = np.repeat([0, 1], len(s))
    tid = np.concatenate([np.arange(len(s)), np.arange(len(s))])
    ev = np.lexsort((pos[tid], phase, step, buf))
    last_write: dict[int, tuple[int, int]] = {}
    reads: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for e in ev.tolist():
        b, t = int(buf[e]), int(tid[e])
        rank = b // n_ch
        if phase[e] == 0:
            here = (int(send_at[t, 0]), int(send_at[t, 1]))
            if b in last_write:
                ops[rank][here[0]][here[1]].deps.append(last_write[b])
            reads[b].append(here)
        else:
            here = (int(recv_at[t, 0]), int(recv_at[t, 1]))
            waits = reads.pop(b, []) + ([last_write[b]] if b in last_write else [])
            ops[rank][here[0]][here[1]].deps.extend(waits)
            last_write[b] = here


def _prune_waits(tb_ops: list[list[_Op]]) -> None:
    """Keep only waits the thread block's order does not already give: none on itself, the
    latest op per other block, and none an earlier op of the block already waited for."""
    for me, seq in enumerate(tb_ops):
        waited: dict[int, int] = {}
        for op in seq:
            latest: dict[int, int] = {}
            for tb, i in op.deps:
                if tb != me and i > waited.get(tb, -1):
                    latest[tb] = max(latest.get(tb, -1), i)
            op.deps = sorted(latest.items())
            waited.update(latest)


def _step_xml(s: int, kind: str, chunk: int, dep: tuple[int, int] | None, hasdep: bool) -> str:
    off = -1 if kind == "nop" else chunk
    depid, deps = dep if dep is not None else (-1, -1)
    return (
        f'      <step s="{s}" type="{kind}" srcbuf="i" srcoff="{off}" dstbuf="i" dstoff="{off}" '
        f'cnt="{0 if kind == "nop" else 1}" depid="{depid}" deps="{deps}" hasdep="{int(hasdep)}"/>'
    )


def to_xml(
    schedule: Schedule,
    name: str | None = None,
    proto: str = "Simple",
    min_bytes: int = 0,
    max_bytes: int = MAX_BYTES,
) -> str:
    """The schedule as MSCCL XML text (deterministic: the same schedule gives the same bytes).

    The schedule must be valid; MscclFormatError if a thread block would exceed MSCCL's 256
    steps (use fewer chunks) or an argument is out of range.
    """
    report = validate(schedule)
    if not report.ok:
        raise ArschedError(f"the schedule is not a valid AllReduce: {report.message}")
    if proto not in PROTOCOLS:
        raise MscclFormatError(f"protocol {proto!r} is not one of {', '.join(PROTOCOLS)}")
    if not 0 <= min_bytes < max_bytes <= MAX_BYTES:
        raise MscclFormatError(f"the size range {min_bytes}..{max_bytes} bytes is empty or out of range")
    s = schedule
    n = s.num_ranks
    rank_of = s.rank_of_node
    src, dst = rank_of[s.src], rank_of[s.dst]
    chan = _channels(src, dst)
    tbs = _thread_blocks(chan, n)
    worst = max(range(n), key=lambda r: len(tbs[r]))
    if len(tbs[worst]) > MAX_TBS:
        raise MscclFormatError(
            f"rank {s.ranks[worst]} needs {len(tbs[worst])} thread blocks (one per peer and direction); "
            f"MSCCL allows {MAX_TBS}"
        )
    ops, order, send_at, recv_at = _place_ops(s, src, dst, tbs, chan)
    _add_waits(s, ops, order, src, dst, send_at, recv_at)
    for tb_ops in ops:
        _prune_waits(tb_ops)
    # position of every op once the nops that carry extra waits are in
    where = [[np.cumsum([len(op.deps[:-1]) + 1 for op in seq]) - 1 for seq in tb_ops] for tb_ops in ops]
    nchannels = max(chan.values(), default=0) + 1
    lines = [
        f'<algo name={quoteattr(name or s.algorithm)} proto={quoteattr(proto)} nchannels="{nchannels}" '
        f'nchunksperloop="{s.num_chunks}" ngpus="{n}" coll="allreduce" inplace="1" outofplace="0" '
        f'minBytes="{int(min_bytes)}" maxBytes="{int(max_bytes)}" redop="sum">'
    ]
    for r in range(n):
        targets = {(tb, int(where[r][tb][i])) for seq in ops[r] for op in seq for tb, i in op.deps}
        lines.append(f'  <gpu id="{r}" i_chunks="{s.num_chunks}" o_chunks="{s.num_chunks}" s_chunks="0">')
        for (send, recv, ch), tb in tbs[r].items():
            seq = ops[r][tb]
            if len(seq) and where[r][tb][-1] >= MAX_STEPS_PER_TB:
                raise MscclFormatError(
                    f"thread block {tb} of rank {s.ranks[r]} needs {where[r][tb][-1] + 1} steps; MSCCL "
                    f"allows {MAX_STEPS_PER_TB}, so build the schedule with fewer chunks"
                )
            lines.append(f'    <tb id="{tb}" send="{send}" recv="{recv}" chan="{ch}">')
            k = 0
            for op in seq:
                deps = [(d, int(where[r][d][i])) for d, i in op.deps]
                for dep in deps[:-1]:
                    lines.append(_step_xml(k, "nop", 0, dep, False))
                    k += 1
                lines.append(_step_xml(k, op.kind, op.chunk, deps[-1] if deps else None, (tb, k) in targets))
                k += 1
            lines.append("    </tb>")
        lines.append("  </gpu>")
    lines.append("</algo>")
    return "\n".join(lines) + "\n"


def save_xml(schedule: Schedule, path: str | os.PathLike, **options) -> None:
    """Write the schedule's MSCCL XML atomically; options as for `to_xml`."""
    write_atomic(path, to_xml(schedule, **options))


# ---- import -----------------------------------------------------------------------------------


def _int(elem: ET.Element, key: str, what: str) -> int:
    raw = elem.get(key)
    if raw is None:
        raise MscclFormatError(f"{what} has no {key!r} attribute")
    try:
        return int(raw.strip())
    except ValueError:
        raise MscclFormatError(f"{what} has {key}={raw!r}, which is not an integer") from None


def _children(elem: ET.Element, tag: str) -> list[ET.Element]:
    return [c for c in elem if c.tag == tag]


@dataclass
class _Program:
    """The parsed program as a graph of nodes (op halves) with happens-before edges."""

    ngpus: int
    nchunks: int
    name: str
    edges: list[tuple[int, int]] = field(default_factory=list)
    node_where: list[str] = field(default_factory=list)
    node_tb: list[tuple[int, int]] = field(default_factory=list)
    # per connection (sender, receiver, channel): [(node, chunk)] and [(node, chunk, reduce)]
    sends: dict[tuple[int, int, int], list[tuple[int, int]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    recvs: dict[tuple[int, int, int], list[tuple[int, int, bool]]] = field(
        default_factory=lambda: defaultdict(list)
    )

    def node(self, where: str, tb: tuple[int, int]) -> int:
        self.node_where.append(where)
        self.node_tb.append(tb)
        return len(self.node_where) - 1


def _buffer(step: ET.Element, key: str, what: str) -> None:
    value = step.get(key)
    if value is None:
        raise MscclFormatError(f"{what} has no {key!r} attribute")
    if value == "s":
        raise MscclFormatError(
            f"{what} uses the scratch buffer, which arsched's schedule IR has no counterpart for"
        )
    if value not in ("i", "o"):
        raise MscclFormatError(f"{what} has {key}={value!r}; MSCCL buffers are 'i', 'o' and 's'")


def _parse_tb(prog: _Program, g: int, tb: ET.Element, what: str) -> tuple[int, list[tuple[int, int]], list]:
    """Nodes of one thread block: (id, [(first node, last node)] per step, deps to resolve)."""
    tid = _int(tb, "id", what)
    send, recv, chan = (_int(tb, k, what) for k in ("send", "recv", "chan"))
    for key, peer in (("send", send), ("recv", recv)):
        if not -1 <= peer < prog.ngpus or peer == g:
            raise MscclFormatError(
                f"{what} has {key}={peer}; peers are -1 or another gpu in 0..{prog.ngpus - 1}"
            )
    if chan < 0:
        raise MscclFormatError(f"{what} has the negative channel {chan}")
    steps: list[tuple[int, int]] = []
    waits = []
    for pos, st in enumerate(_children(tb, "step")):
        sw = f"step {pos} of {what}"
        if _int(st, "s", sw) != pos:
            raise MscclFormatError(f"{sw} is numbered s={st.get('s')}; steps must be numbered 0, 1, 2, ...")
        kind = st.get("type")
        if kind not in STEP_TYPES:
            raise MscclFormatError(
                f"{sw} has the unknown type {kind!r}; MSCCL types are {', '.join(STEP_TYPES)}"
            )
        receives, reduces, sends = STEP_TYPES[kind]
        srcoff, dstoff, cnt = (_int(st, k, sw) for k in ("srcoff", "dstoff", "cnt"))
        depid, deps = _int(st, "depid", sw), _int(st, "deps", sw)
        if depid >= 0:
            waits.append((pos, depid, deps, sw))
        if kind == "nop":
            node = prog.node(sw, (g, tid))
            steps.append((node, node))
            continue
        _buffer(st, "srcbuf", sw)
        _buffer(st, "dstbuf", sw)
        if cnt < 1:
            raise MscclFormatError(f"{sw} moves cnt={cnt} chunks; it must be at least 1")
        combines = kind in ("cpy", "re", "rrc", "rrcs")  # src and dst are both local chunks
        local = srcoff if kind in ("s", "rrs") else dstoff
        for off, key in ((srcoff, "srcoff"), (dstoff, "dstoff")) if combines else ((local, "offset"),):
            if not 0 <= off <= prog.nchunks - cnt:
                raise MscclFormatError(
                    f"{sw} has {key}={off} with cnt={cnt}, outside the {prog.nchunks} chunks of the buffer"
                )
        if combines and srcoff != dstoff:
            raise MscclFormatError(
                f"{sw} ({kind}) combines chunk {srcoff} into chunk {dstoff}; arsched's schedule IR "
                "keeps every chunk in its own position"
            )
        if (receives and recv < 0) or (sends and send < 0):
            raise MscclFormatError(f"{sw} is a {kind!r} step in a thread block without that peer")
        first = last = prog.node(sw, (g, tid))
        chunks = range(local, local + cnt)
        if receives:
            prog.recvs[(recv, g, chan)].extend((first, c, reduces) for c in chunks)
        if sends:
            if receives:  # the send half of a fused step comes after its receive half
                last = prog.node(sw, (g, tid))
                prog.edges.append((first, last))
            prog.sends[(g, send, chan)].extend((last, c) for c in chunks)
        steps.append((first, last))
    for (_, a), (b, _) in itertools.pairwise(steps):
        prog.edges.append((a, b))
    return tid, steps, [(steps[p][0], d, ds, w) for p, d, ds, w in waits]


def _parse(text: str, where: str) -> tuple[_Program, list]:
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        raise MscclFormatError(f"{where} is not well-formed XML ({e})") from None
    if root.tag != "algo":
        raise MscclFormatError(f"{where} has root element <{root.tag}>; MSCCL XML starts with <algo>")
    coll = root.get("coll")
    if coll != "allreduce":
        raise MscclFormatError(f"{where} is a {coll!r} algorithm; only allreduce can be imported")
    prog = _Program(
        _int(root, "ngpus", "<algo>"), _int(root, "nchunksperloop", "<algo>"), root.get("name", "msccl")
    )
    if prog.ngpus < 1 or prog.nchunks < 1:
        raise MscclFormatError(f"{where} needs ngpus and nchunksperloop of at least 1")
    seen: set[int] = set()
    transfers = []
    for gpu in _children(root, "gpu"):
        g = _int(gpu, "id", "a <gpu>")
        if not 0 <= g < prog.ngpus or g in seen:
            raise MscclFormatError(f"<gpu id={g}> is out of range 0..{prog.ngpus - 1} or listed twice")
        seen.add(g)
        blocks: dict[int, list[tuple[int, int]]] = {}
        waits = []
        for tb in _children(gpu, "tb"):
            tid, steps, tb_waits = _parse_tb(prog, g, tb, f"tb {tb.get('id')} of gpu {g}")
            if tid in blocks:
                raise MscclFormatError(f"gpu {g} has two thread blocks with id {tid}")
            blocks[tid] = steps
            waits += tb_waits
        for node, depid, deps, sw in waits:
            if depid not in blocks or not 0 <= deps < len(blocks[depid]):
                raise MscclFormatError(
                    f"{sw} waits for step {deps} of thread block {depid}, which gpu {g} lacks"
                )
            prog.edges.append((blocks[depid][deps][1], node))
    for key in sorted(set(prog.sends) | set(prog.recvs)):
        a, b, chan = key
        out, inn = prog.sends.get(key, []), prog.recvs.get(key, [])
        if len(out) != len(inn):
            raise MscclFormatError(
                f"gpu {a} sends {len(out)} chunks to gpu {b} on channel {chan}; gpu {b} receives {len(inn)}"
            )
        for (sn, sc), (rn, rc, red) in zip(out, inn, strict=True):
            if sc != rc:
                raise MscclFormatError(
                    f"gpu {a} sends chunk {sc} that gpu {b} receives into chunk {rc}; arsched's schedule "
                    "IR keeps every chunk in its own position"
                )
            prog.edges.append((sn, rn))
            transfers.append((a, b, sc, red, sn, rn))
    return prog, transfers


def _happens_before(prog: _Program) -> tuple[np.ndarray, list[int]]:
    """Topological index of every node and its ancestors as a bitset; MscclFormatError on a cycle."""
    n = len(prog.node_where)
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = np.zeros(n, dtype=np.int64)
    for a, b in prog.edges:
        succ[a].append(b)
        indeg[b] += 1
    ready = sorted(np.flatnonzero(indeg == 0).tolist(), reverse=True)
    topo = np.full(n, -1, dtype=np.int64)
    ancestors = [0] * n
    k = 0
    while ready:
        v = ready.pop()
        topo[v] = k
        k += 1
        mine = ancestors[v] | (1 << v)
        for w in succ[v]:
            ancestors[w] |= mine
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    if k < n:
        stuck = prog.node_where[int(np.flatnonzero(topo < 0)[0])]
        raise MscclFormatError(f"the waits and receives of the program form a cycle ({stuck} can never run)")
    return topo, ancestors


def _constraints(prog: _Program, transfers: list, topo: np.ndarray, ancestors: list[int]) -> np.ndarray:
    """Rows (before, after, gap): step[after] >= step[before] + gap, from the buffer accesses
    (a write before a read or a copy: gap 1; a read before a write, reduces in a row: gap 0) and
    from thread-block order (gap 0, keeps each block's order)."""
    access = defaultdict(list)  # (gpu, chunk) -> [(topo, node, transfer, kind)], kind r / reduce / copy
    for t, (a, b, c, red, sn, rn) in enumerate(transfers):
        access[(a, c)].append((int(topo[sn]), sn, t, "read"))
        access[(b, c)].append((int(topo[rn]), rn, t, "reduce" if red else "copy"))
    rows = []

    def ordered(x: int, y: int, gpu: int, chunk: int) -> None:
        if not (ancestors[y] >> x) & 1:
            raise MscclFormatError(
                f"{prog.node_where[x]} and {prog.node_where[y]} both touch chunk {chunk} of gpu {gpu} "
                "with nothing ordering them (a race)"
            )

    for (gpu, chunk), acc in sorted(access.items()):
        acc.sort()
        last = None
        reads: list[tuple[int, int]] = []
        for _, node, t, kind in acc:
            if kind == "read":
                if last is not None:
                    ordered(last[0], node, gpu, chunk)
                    rows.append((last[1], t, 1))
                reads.append((node, t))
                continue
            for rnode, rt in reads:
                ordered(rnode, node, gpu, chunk)
                rows.append((rt, t, 0))
            if last is not None:
                ordered(last[0], node, gpu, chunk)
                rows.append((last[1], t, int(not (kind == last[2] == "reduce"))))
            last, reads = (node, t, kind), []
    by_tb = defaultdict(list)  # thread block -> [(topo, transfer)]
    for t, (_, _, _, _, sn, rn) in enumerate(transfers):
        for node in (sn, rn):
            by_tb[prog.node_tb[node]].append((int(topo[node]), t))
    for seq in by_tb.values():
        seq.sort()
        rows += [(x[1], y[1], 0) for x, y in itertools.pairwise(seq) if x[1] != y[1]]
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def _earliest_steps(rows: np.ndarray, count: int) -> np.ndarray:
    """Least steps meeting every constraint row (longest paths by repeated relaxation)."""
    step = np.zeros(count, dtype=np.int64)
    for _ in range(count + 1):
        new = step.copy()
        np.maximum.at(new, rows[:, 1], step[rows[:, 0]] + rows[:, 2])
        if np.array_equal(new, step):
            return step
        step = new
    raise MscclFormatError("the program's order cannot be written as steps (its constraints form a cycle)")


def from_xml(
    text: str,
    topology: Topology,
    ranks: Sequence[str] | None = None,
    nbytes: float = 1e8,
    where: str = "the XML",
) -> Schedule:
    """A validated Schedule from MSCCL XML; gpu i is `ranks[i]` (default: the topology's first
    servers), paths are the topology's routes. MscclFormatError with one sentence otherwise."""
    prog, transfers = _parse(text, where)
    names = tuple(topology.servers[: prog.ngpus] if ranks is None else ranks)
    if len(names) != prog.ngpus:
        raise MscclFormatError(
            f"{where} runs on {prog.ngpus} gpus but {len(names)} ranks are given"
            + (f" ({topology.name} has {len(topology.servers)} servers)" if ranks is None else "")
        )
    topo_index, ancestors = _happens_before(prog)
    rows = _constraints(prog, transfers, topo_index, ancestors)
    step = _earliest_steps(rows, len(transfers))
    builder = ScheduleBuilder(topology, names, nbytes, prog.nchunks, prog.name, {"source": "msccl-xml"})
    # within a step, in the order of the receives: keeps each connection's order and each chain
    # of reduces into one chunk, so exporting the result gives the same program again
    rn_topo = [int(topo_index[t[5]]) for t in transfers]
    for t in sorted(range(len(transfers)), key=lambda t: (int(step[t]), rn_topo[t])):
        a, b, c, red, _, _ = transfers[t]
        builder.add(int(step[t]), c, names[a], names[b], "reduce" if red else "copy", where=f"{where}")
    schedule = builder.build()
    report = validate(schedule)
    if not report.ok:
        raise MscclFormatError(f"{where} does not compute an AllReduce: {report.message}")
    return schedule


def load_xml(
    path: str | os.PathLike, topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 1e8
) -> Schedule:
    """Read an MSCCL XML file into a Schedule (see `from_xml`)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise MscclFormatError(f"cannot read MSCCL XML file {p} ({e})") from None
    return from_xml(text, topology, ranks, nbytes, where=str(p))
