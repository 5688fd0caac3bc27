"""Import an MSCCL XML algorithm as a validated Schedule of its collective (format:
`msccl_format`).

`coll` names the collective; every buffer position is read as the chunk id that
`msccl_format.Buffers` puts there (the layout the export writes, which is the runtime's own for
in-place calls). Every connection's sends are matched with its receives in order, the
happens-before order of the program is built (thread-block order, waits, send before receive),
every two conflicting accesses to a chunk must be ordered (otherwise the program has a race),
and each transfer gets the earliest step the step semantics allow. The root of a Broadcast is
the one gpu that receives nothing, of a Reduce the one that sends nothing. Scratch outside
AllToAll and moves between chunk ids have no counterpart in the schedule IR and are refused
with one sentence; a local copy onto the same chunk id (AllToAll's block to itself, from input
to output) does nothing. `rrs` (receive, reduce, send without storing) is read as `rrcs`: the
partial sum stays in the local chunk.
"""

from __future__ import annotations

import itertools
import os
import xml.etree.ElementTree as ET  # the Element type only: parsing goes through defusedxml
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from defusedxml import DefusedXmlException
from defusedxml.ElementTree import ParseError, fromstring

from arsched.collective.kinds import ROOTED, Collective
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.collective.validate import validate
from arsched.fileio import read_text
from arsched.runtime.msccl_format import FROM_COLL, STEP_TYPES, Buffers, MscclFormatError
from arsched.topology.core import Topology


def _int(elem: ET.Element, key: str, what: str) -> int:
    raw = elem.get(key)
    if raw is None:
        raise MscclFormatError(f"{what} has no {key!r} attribute")
    try:
        value = int(raw.strip())
    except ValueError:
        raise MscclFormatError(f"{what} has {key}={raw!r}, which is not an integer") from None
    if not -(2**63) <= value < 2**63:
        raise MscclFormatError(f"{what} has {key}={_short(raw)}, outside the int64 range the runtime reads")
    return value


def _short(raw: str) -> str:
    """An attribute value for a message: as written up to 30 characters, else its length."""
    return repr(raw) if len(raw) <= 30 else f"a {len(raw)}-character number"


def _children(elem: ET.Element, tag: str) -> list[ET.Element]:
    return [c for c in elem if c.tag == tag]


@dataclass
class _Program:
    """The parsed program as a graph of nodes (op halves) with happens-before edges."""

    ngpus: int
    buffers: Buffers
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


def _buffer_name(st: ET.Element, key: str, what: str) -> str:
    """The buffer a step names in attribute `key`: 'i', 'o' or 's'."""
    value = st.get(key)
    if value is None:
        raise MscclFormatError(f"{what} has no {key!r} attribute")
    if value not in ("i", "o", "s"):
        raise MscclFormatError(f"{what} has {key}={value!r}; MSCCL buffers are 'i', 'o' and 's'")
    return value


def _chunks(buffers: Buffers, g: int, st: ET.Element, key: str, off: int, cnt: int, what: str) -> list[int]:
    """The chunk ids of `cnt` chunks from offset `off` of the buffer named by attribute `key`
    on gpu `g`; one sentence for an unknown buffer, scratch outside AllToAll or a range past
    the buffer."""
    value = _buffer_name(st, key, what)
    if value == "s" and buffers.collective != "alltoall":
        raise MscclFormatError(
            f"{what} uses the scratch buffer, which arsched's schedule IR has no counterpart for "
            "outside AllToAll"
        )
    size = buffers.sizes(scratch=True)[value]
    if not 0 <= off <= size - cnt:
        raise MscclFormatError(
            f"{what} has {key[:3]}off={off} with cnt={cnt}, outside the {size} chunks of buffer {value!r}"
        )
    return [buffers.chunk(g, value, o) for o in range(off, off + cnt)]


@dataclass(frozen=True)
class _Block:
    """A thread block's attributes: its id, its send and receive peers (-1: none), its channel."""

    id: int
    send: int
    recv: int
    chan: int


@dataclass(frozen=True)
class _Step:
    """A step's attributes; `where` names the step in error messages."""

    where: str
    kind: str
    srcoff: int
    dstoff: int
    cnt: int
    depid: int
    deps: int


def _read_block(tb: ET.Element, g: int, ngpus: int, what: str) -> _Block:
    """The thread block's attributes; its peers are -1 or another gpu, its channel not negative."""
    block = _Block(_int(tb, "id", what), *(_int(tb, k, what) for k in ("send", "recv", "chan")))
    for key, peer in (("send", block.send), ("recv", block.recv)):
        if not -1 <= peer < ngpus or peer == g:
            raise MscclFormatError(f"{what} has {key}={peer}; peers are -1 or another gpu in 0..{ngpus - 1}")
    if block.chan < 0:
        raise MscclFormatError(f"{what} has the negative channel {block.chan}")
    return block


def _read_step(st: ET.Element, pos: int, what: str) -> _Step:
    """The attributes of the step at position `pos`: numbered `pos`, of a known type, with
    integer offsets, count and wait."""
    sw = f"step {pos} of {what}"
    if _int(st, "s", sw) != pos:
        raise MscclFormatError(f"{sw} is numbered s={st.get('s')}; steps must be numbered 0, 1, 2, ...")
    kind = st.get("type")
    if kind not in STEP_TYPES:
        raise MscclFormatError(f"{sw} has the unknown type {kind!r}; MSCCL types are {', '.join(STEP_TYPES)}")
    srcoff, dstoff, cnt = (_int(st, k, sw) for k in ("srcoff", "dstoff", "cnt"))
    return _Step(sw, kind, srcoff, dstoff, cnt, _int(st, "depid", sw), _int(st, "deps", sw))


def _local_chunks(buffers: Buffers, g: int, st: ET.Element, step: _Step) -> list[int]:
    """The chunk ids of gpu `g` that a data-moving step touches. Refuses empty counts, buffers
    the collective has no place for, offsets outside the buffer and moves between chunk ids."""
    if step.cnt < 1:
        raise MscclFormatError(f"{step.where} moves cnt={step.cnt} chunks; it must be at least 1")
    for key in ("srcbuf", "dstbuf"):  # the runtime reads both names, whichever the step uses
        _buffer_name(st, key, step.where)
    combines = step.kind in ("cpy", "re", "rrc", "rrcs")  # src and dst are both local chunks
    if combines or step.kind in ("s", "rrs"):
        src = _chunks(buffers, g, st, "srcbuf", step.srcoff, step.cnt, step.where)
    if combines or step.kind not in ("s", "rrs"):
        dst = _chunks(buffers, g, st, "dstbuf", step.dstoff, step.cnt, step.where)
    if combines and src != dst:
        raise MscclFormatError(
            f"{step.where} ({step.kind}) combines chunk {src[0]} into chunk {dst[0]}; arsched's "
            "schedule IR keeps every chunk in its own position"
        )
    return src if step.kind in ("s", "rrs") else dst


def _check_peers(step: _Step, block: _Block) -> None:
    """A step that receives (sends) needs a thread block with a receive (send) peer."""
    receives, _, sends = STEP_TYPES[step.kind]
    if (receives and block.recv < 0) or (sends and block.send < 0):
        raise MscclFormatError(f"{step.where} is a {step.kind!r} step in a thread block without that peer")


def _add_step(prog: _Program, g: int, block: _Block, st: ET.Element, step: _Step) -> tuple[int, int]:
    """The step's (first, last) node, its halves queued on their connections. A fused step is two
    nodes: its send half comes after its receive half; a nop is one node and moves nothing."""
    first = last = prog.node(step.where, (g, block.id))
    if step.kind == "nop":
        return first, last
    chunks = _local_chunks(prog.buffers, g, st, step)
    _check_peers(step, block)
    receives, reduces, sends = STEP_TYPES[step.kind]
    if receives:
        prog.recvs[(block.recv, g, block.chan)].extend((first, c, reduces) for c in chunks)
    if sends:
        if receives:
            last = prog.node(step.where, (g, block.id))
            prog.edges.append((first, last))
        prog.sends[(g, block.send, block.chan)].extend((last, c) for c in chunks)
    return first, last


def _parse_tb(prog: _Program, g: int, tb: ET.Element, what: str) -> tuple[int, list[tuple[int, int]], list]:
    """Nodes of one thread block, chained in step order: (id, [(first node, last node)] per
    step, [(node, depid, deps, where)] waits to resolve once the gpu's blocks are known)."""
    block = _read_block(tb, g, prog.ngpus, what)
    nodes: list[tuple[int, int]] = []
    waits = []
    for pos, st in enumerate(_children(tb, "step")):
        step = _read_step(st, pos, what)
        nodes.append(_add_step(prog, g, block, st, step))
        if step.depid >= 0:
            waits.append((nodes[-1][0], step.depid, step.deps, step.where))
    for (_, a), (b, _) in itertools.pairwise(nodes):
        prog.edges.append((a, b))
    return block.id, nodes, waits


def _read_root(text: str, where: str) -> tuple[ET.Element, _Program]:
    """The `<algo>` element and an empty program of its collective and size."""
    try:
        root = fromstring(text, forbid_dtd=True)  # MSCCL XML has no DTD: none may expand entities
    except DefusedXmlException:
        raise MscclFormatError(
            f"{where} declares a DTD (<!DOCTYPE ...>), which arsched refuses: MSCCL XML needs none, "
            "and one can expand entities without bound or read other files"
        ) from None
    except ParseError as e:
        raise MscclFormatError(f"{where} is not well-formed XML ({e})") from None
    if root.tag != "algo":
        raise MscclFormatError(f"{where} has root element <{root.tag}>; MSCCL XML starts with <algo>")
    coll = root.get("coll")
    if coll not in FROM_COLL:
        raise MscclFormatError(f"{where} is a {coll!r} algorithm; arsched imports {', '.join(FROM_COLL)}")
    name = FROM_COLL[coll]
    ngpus, per_loop = _int(root, "ngpus", "<algo>"), _int(root, "nchunksperloop", "<algo>")
    if ngpus < 1 or per_loop < 1:
        raise MscclFormatError(f"{where} needs ngpus and nchunksperloop of at least 1")
    chunks = per_loop * (ngpus if name == "alltoall" else 1)
    if name == "alltoall" and per_loop % ngpus:
        problem = f"an alltoall over {ngpus} gpus needs a multiple of {ngpus} chunks per loop, not {per_loop}"
    else:
        problem = Collective(name, ngpus, chunks, 0 if name in ROOTED else None).problem()
    if problem is not None:
        raise MscclFormatError(f"{where} cannot be read: {problem}")
    return root, _Program(ngpus, Buffers(name, ngpus, chunks), root.get("name", "msccl"))


def _parse_gpu(prog: _Program, g: int, gpu: ET.Element) -> None:
    """The nodes of gpu `g`'s thread blocks, with the waits between them as edges."""
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
            raise MscclFormatError(f"{sw} waits for step {deps} of thread block {depid}, which gpu {g} lacks")
        prog.edges.append((blocks[depid][deps][1], node))


def _match_connections(prog: _Program) -> list[tuple[int, int, int, bool, int, int]]:
    """Each connection's sends paired with its receives in order, as transfers (sender,
    receiver, chunk, reduces, send node, receive node); a send happens before its receive."""
    transfers = []
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
    return transfers


def _parse(text: str, where: str) -> tuple[_Program, list]:
    """The program's happens-before graph and its transfers."""
    root, prog = _read_root(text, where)
    seen: set[int] = set()
    for gpu in _children(root, "gpu"):
        g = _int(gpu, "id", "a <gpu>")
        if not 0 <= g < prog.ngpus or g in seen:
            raise MscclFormatError(f"<gpu id={g}> is out of range 0..{prog.ngpus - 1} or listed twice")
        seen.add(g)
        _parse_gpu(prog, g, gpu)
    return prog, _match_connections(prog)


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


def _check_ordered(prog: _Program, ancestors: list[int], x: int, y: int, gpu: int, chunk: int) -> None:
    """Node `x` happens before node `y`; otherwise their accesses to the chunk race."""
    if not (ancestors[y] >> x) & 1:
        raise MscclFormatError(
            f"{prog.node_where[x]} and {prog.node_where[y]} both touch chunk {chunk} of gpu {gpu} "
            "with nothing ordering them (a race)"
        )


def _constraints(prog: _Program, transfers: list, topo: np.ndarray, ancestors: list[int]) -> np.ndarray:
    """Rows (before, after, gap): step[after] >= step[before] + gap, from the buffer accesses
    (a write before a read or a copy: gap 1; a read before a write, reduces in a row: gap 0) and
    from thread-block order (gap 0, keeps each block's order)."""
    access = defaultdict(list)  # (gpu, chunk) -> [(topo, node, transfer, kind)], kind r / reduce / copy
    for t, (a, b, c, red, sn, rn) in enumerate(transfers):
        access[(a, c)].append((int(topo[sn]), sn, t, "read"))
        access[(b, c)].append((int(topo[rn]), rn, t, "reduce" if red else "copy"))
    rows = []
    for (gpu, chunk), acc in sorted(access.items()):
        acc.sort()
        last = None
        reads: list[tuple[int, int]] = []
        for _, node, t, kind in acc:
            if kind == "read":
                if last is not None:
                    _check_ordered(prog, ancestors, last[0], node, gpu, chunk)
                    rows.append((last[1], t, 1))
                reads.append((node, t))
                continue
            for rnode, rt in reads:
                _check_ordered(prog, ancestors, rnode, node, gpu, chunk)
                rows.append((rt, t, 0))
            if last is not None:
                _check_ordered(prog, ancestors, last[0], node, gpu, chunk)
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


def _root(prog: _Program, transfers: list, where: str) -> int | None:
    """The root gpu of a Broadcast (the one that receives nothing) or Reduce (the one that sends
    nothing); None for the other collectives."""
    name = prog.buffers.collective
    if name not in ROOTED:
        return None
    busy = {t[1] if name == "broadcast" else t[0] for t in transfers}
    idle = [g for g in range(prog.ngpus) if g not in busy]
    if len(idle) != 1:
        doing = "receives" if name == "broadcast" else "sends"
        raise MscclFormatError(
            f"{where} is a {name} whose root cannot be told: the root is the one gpu that {doing} "
            f"nothing, and {len(idle)} gpus do"
        )
    return idle[0]


def from_xml(
    text: str,
    topology: Topology,
    ranks: Sequence[str] | None = None,
    nbytes: float = 1e8,
    where: str = "the XML",
) -> Schedule:
    """A validated Schedule of the XML's collective; gpu i is `ranks[i]` (default: the
    topology's first servers), paths are the topology's routes, `nbytes` is one rank's buffer
    as the schedule format defines it. MscclFormatError with one sentence otherwise."""
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
    root = _root(prog, transfers, where)
    builder = ScheduleBuilder(
        topology,
        names,
        nbytes,
        prog.buffers.num_chunks,
        prog.name,
        {"source": "msccl-xml"},
        collective=prog.buffers.collective,
        root=None if root is None else names[root],
    )
    # within a step, in the order of the receives: keeps each connection's order and each chain
    # of reduces into one chunk, so exporting the result gives the same program again
    rn_topo = [int(topo_index[t[5]]) for t in transfers]
    for t in sorted(range(len(transfers)), key=lambda t: (int(step[t]), rn_topo[t])):
        a, b, c, red, _, _ = transfers[t]
        builder.add(int(step[t]), c, names[a], names[b], "reduce" if red else "copy", where=f"{where}")
    schedule = builder.build()
    report = validate(schedule)
    if not report.ok:
        raise MscclFormatError(f"{where} does not compute {schedule.kind.title}: {report.message}")
    return schedule


def load_xml(
    path: str | os.PathLike, topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 1e8
) -> Schedule:
    """Read an MSCCL XML file into a Schedule (see `from_xml`)."""
    text = read_text(path, "MSCCL XML file", MscclFormatError)
    return from_xml(text, topology, ranks, nbytes, where=str(path))
