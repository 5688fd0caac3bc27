"""Export a valid Schedule as an MSCCL XML algorithm (format: `msccl_format`).

The program names the schedule's collective in `coll` and puts each chunk where
`msccl_format.Buffers` says: in place for all but AllToAll (AllReduce, Broadcast, Reduce and
ReduceScatter on the input `i`, AllGather on its output `o`), AllToAll out of place with the
chunks a gpu relays in scratch and each gpu's block to itself one local copy (`cpy`, in a
thread block of its own, as MSCCL's own AllToAll programs do). One thread block per (rank,
peer, direction), and per channel where the schedule has several (`Schedule.channels`: step s
on channel s mod `channels`), on channel 0 unless a rank has more than MSCCL's 32 thread blocks
per channel in one direction (then the next channel, the same at both ends). Where the ranks
fall in boxes (GPUs joined by their box fabric), the connections between boxes are kept on
channels of their own per rail, the sender's place in its box (channel 1 + rail, then
1 + rail + (1 + g)·k when a rail needs more), and those inside the boxes on channels 0, 1 + g,
...: a runtime spreads its channels over a GPU's NICs, and each rail's traffic then runs apart
from the box fabric's. A transfer is a send
(`s`) at its source and a receive at its destination, `rrc` (receive, reduce, copy) for
`reduce` and `r` for `copy`, each thread block in step order. Waits follow the step semantics
(design §3.3): a send waits for the last write of its chunk; a receive waits for the last
write of its chunk (two thread blocks must never add into the same memory at once, so writes
are serialised) and for the sends that read the chunk since (they must send the old value).
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from xml.sax.saxutils import quoteattr

import numpy as np

from arsched.collective.schedule import COPY, MAX_CHANNELS, Schedule
from arsched.collective.validate import validate
from arsched.errors import ArschedError
from arsched.fileio import write_atomic
from arsched.runtime.msccl_format import (
    COLLS,
    MAX_BYTES,
    MAX_COUNT,
    MAX_STEPS_PER_TB,
    MAX_TBS,
    MAX_TBS_PER_CHANNEL,
    PROTOCOLS,
    Buffers,
    MscclFormatError,
)
from arsched.topology.boxes import candidate_groups

REDUCING = ("allreduce", "reduce_scatter", "reduce")  # the others only copy: redop="nop"


@dataclass
class _Op:
    """One send or receive of the exported program; `deps` are (thread block, op index)."""

    kind: str
    chunk: int
    deps: list[tuple[int, int]] = field(default_factory=list)


def _rails(s: Schedule, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, int]:
    """Every transfer's channel class, and how many classes: where the ranks fall in boxes
    (`topology.boxes`, by the fastest links: GPUs on one box fabric), 0 inside a box and 1 + the
    sender's place in its box between boxes (its rail: GPU j of every box sends through NIC j on a
    rail-optimised fabric); elsewhere all 0, one class."""
    found = candidate_groups(s.topology, s.ranks, by_switch=False)
    if not found:
        return np.zeros(len(src), dtype=np.int64), 1
    box, place = np.empty(s.num_ranks, dtype=np.int64), np.empty(s.num_ranks, dtype=np.int64)
    for b, members in enumerate(found[0]):
        box[list(members)], place[list(members)] = b, np.arange(len(members))
    return np.where(box[src] == box[dst], 0, 1 + place[src]), 1 + len(found[0][0])


def _channels(src: np.ndarray, dst: np.ndarray, kind: np.ndarray, kinds: int) -> np.ndarray:
    """Every transfer's channel: per connection (a -> b, of kind k), such that no rank sends,
    nor receives, on more than MSCCL's 32 thread blocks per channel, the lowest channel with
    room at both ends among those of its kind (k, k + kinds, k + 2·kinds, ...), so that each
    kind keeps channels of its own (`to_xml`); where that needs more than MSCCL's 32 channels,
    the same with one kind."""
    used: dict[tuple[str, int, int], int] = defaultdict(int)  # (direction, rank, channel) -> blocks
    triples, which = np.unique(np.stack([src, dst, kind], axis=1), axis=0, return_inverse=True)
    out = np.empty(len(triples), dtype=np.int64)
    for i, (a, b, k) in enumerate(triples.tolist()):
        ch = k
        while used[("s", a, ch)] >= MAX_TBS_PER_CHANNEL or used[("r", b, ch)] >= MAX_TBS_PER_CHANNEL:
            ch += kinds
        used[("s", a, ch)] += 1
        used[("r", b, ch)] += 1
        out[i] = ch
    if kinds > 1 and out.max(initial=0) >= MAX_CHANNELS:
        return _channels(src, dst, np.zeros_like(kind), 1)
    return out[which.ravel()]


def _thread_blocks(
    src: np.ndarray, dst: np.ndarray, chan: np.ndarray, n: int
) -> list[dict[tuple[int, int, int], int]]:
    """Per rank: (send peer, recv peer, channel) -> thread block id, one block per peer,
    direction and channel, sorted by (send, recv, channel) so that blocks on the same link sit
    together."""
    keys: list[set[tuple[int, int, int]]] = [set() for _ in range(n)]
    for a, b, ch in set(zip(src.tolist(), dst.tolist(), chan.tolist(), strict=True)):
        keys[a].add((b, -1, ch))
        keys[b].add((-1, a, ch))
    return [{k: i for i, k in enumerate(sorted(ks))} for ks in keys]


def _place_ops(s: Schedule, src: np.ndarray, dst: np.ndarray, tbs: list[dict], chan: np.ndarray) -> tuple:
    """The ops of every thread block in step order, and where each transfer's halves went."""
    ops: list[list[list[_Op]]] = [[[] for _ in t] for t in tbs]
    order = np.lexsort((np.arange(len(s)), s.step))
    send_at = np.zeros((len(s), 2), dtype=np.int64)  # (tb, index) at the source
    recv_at = np.zeros((len(s), 2), dtype=np.int64)
    for t in order.tolist():
        a, b, c, ch = int(src[t]), int(dst[t]), int(s.chunk[t]), int(chan[t])
        tb = tbs[a][(b, -1, ch)]
        send_at[t] = tb, len(ops[a][tb])
        ops[a][tb].append(_Op("s", c))
        tb = tbs[b][(-1, a, ch)]
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


def _step_xml(
    s: int, kind: str, at: tuple[str, int], dep: tuple[int, int] | None, hasdep: bool, to=None, cnt=1
) -> str:
    """One step on (buffer, offset) `at`, and onto `to` for a local copy."""
    buf, off = ("i", -1) if kind == "nop" else at
    dst, dstoff = to or (buf, off)
    depid, deps = dep if dep is not None else (-1, -1)
    return (
        f'      <step s="{s}" type="{kind}" srcbuf="{buf}" srcoff="{off}" dstbuf="{dst}" dstoff="{dstoff}" '
        f'cnt="{0 if kind == "nop" else cnt}" depid="{depid}" deps="{deps}" hasdep="{int(hasdep)}"/>'
    )


def _self_copy(buffers: Buffers, rank: int) -> list[str]:
    """An AllToAll gpu's block to itself, copied from `i` to `o` in steps of at most MAX_COUNT
    chunks."""
    k = buffers.block
    return [
        _step_xml(i, "cpy", ("i", rank * k + a), None, False, ("o", rank * k + a), min(MAX_COUNT, k - a))
        for i, a in enumerate(range(0, k, MAX_COUNT))
    ]


def _check_self_blocks(s: Schedule) -> None:
    """An AllToAll export copies each rank's block to itself locally: no transfer may move it."""
    k = s.num_chunks // (s.num_ranks * s.num_ranks)
    pair = s.chunk // k
    mine = pair // s.num_ranks == pair % s.num_ranks
    if mine.any():
        c = int(s.chunk[np.flatnonzero(mine)[0]])
        raise MscclFormatError(
            f"{s.algorithm} moves chunk {c}, part of a rank's AllToAll block to itself, which the "
            "MSCCL export copies locally from input to output"
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
        raise ArschedError(f"the schedule is not a valid {schedule.kind.title}: {report.message}")
    if proto not in PROTOCOLS:
        raise MscclFormatError(f"protocol {proto!r} is not one of {', '.join(PROTOCOLS)}")
    if not 0 <= min_bytes < max_bytes <= MAX_BYTES:
        raise MscclFormatError(f"the size range {min_bytes}..{max_bytes} bytes is empty or out of range")
    s = schedule
    n = s.num_ranks
    all_to_all = s.collective == "alltoall"
    if all_to_all:
        _check_self_blocks(s)
    buffers = Buffers(s.collective, n, s.num_chunks)
    rank_of = s.rank_of_node
    src, dst = rank_of[s.src], rank_of[s.dst]
    rail, classes = _rails(s, src, dst)
    # kinds of connection: the schedule's channel (step mod channels), then the rail
    chan = _channels(src, dst, np.mod(s.step, s.channels) * classes + rail, classes * s.channels)
    tbs = _thread_blocks(src, dst, chan, n)
    worst = max(range(n), key=lambda r: len(tbs[r]))
    if len(tbs[worst]) + all_to_all > MAX_TBS:
        raise MscclFormatError(
            f"rank {s.ranks[worst]} needs {len(tbs[worst]) + all_to_all} thread blocks (one per peer and "
            f"direction{', one for its local copy' if all_to_all else ''}); MSCCL allows {MAX_TBS}"
        )
    ops, order, send_at, recv_at = _place_ops(s, src, dst, tbs, chan)
    _add_waits(s, ops, order, src, dst, send_at, recv_at)
    for tb_ops in ops:
        _prune_waits(tb_ops)
    # position of every op once the nops that carry extra waits are in
    where = [[np.cumsum([len(op.deps[:-1]) + 1 for op in seq]) - 1 for seq in tb_ops] for tb_ops in ops]
    nchannels = int(chan.max(initial=0)) + 1
    lines = [
        f'<algo name={quoteattr(name or s.algorithm)} proto={quoteattr(proto)} nchannels="{nchannels}" '
        f'nchunksperloop="{buffers.per_loop}" ngpus="{n}" coll="{COLLS[s.collective]}" '
        f'inplace="{int(not all_to_all)}" outofplace="{int(all_to_all)}" minBytes="{int(min_bytes)}" '
        f'maxBytes="{int(max_bytes)}" redop="{"sum" if s.collective in REDUCING else "nop"}">'
    ]
    for r in range(n):
        targets = {(tb, int(where[r][tb][i])) for seq in ops[r] for op in seq for tb, i in op.deps}
        relays = any(buffers.place(r, op.chunk)[0] == "s" for seq in ops[r] for op in seq)
        size = buffers.sizes(relays)
        lines.append(f'  <gpu id="{r}" i_chunks="{size["i"]}" o_chunks="{size["o"]}" s_chunks="{size["s"]}">')
        for (send, recv, ch), tb in tbs[r].items():
            seq = ops[r][tb]
            if len(seq) and where[r][tb][-1] >= MAX_STEPS_PER_TB:
                raise MscclFormatError(
                    f"thread block {tb} of rank {s.ranks[r]} needs {where[r][tb][-1] + 1} steps; MSCCL "
                    f"allows {MAX_STEPS_PER_TB}, so build the schedule with fewer chunks: for a smaller "
                    "size (MSCCL runs an algorithm's chunks in slices over any larger buffer)"
                )
            lines.append(f'    <tb id="{tb}" send="{send}" recv="{recv}" chan="{ch}">')
            k = 0
            for op in seq:
                deps = [(d, int(where[r][d][i])) for d, i in op.deps]
                for dep in deps[:-1]:
                    lines.append(_step_xml(k, "nop", ("i", -1), dep, False))
                    k += 1
                at = buffers.place(r, op.chunk)
                lines.append(_step_xml(k, op.kind, at, deps[-1] if deps else None, (tb, k) in targets))
                k += 1
            lines.append("    </tb>")
        if all_to_all:
            lines += [f'    <tb id="{len(tbs[r])}" send="-1" recv="-1" chan="0">', *_self_copy(buffers, r)]
            lines.append("    </tb>")
        lines.append("  </gpu>")
    lines.append("</algo>")
    return "\n".join(lines) + "\n"


def save_xml(schedule: Schedule, path: str | os.PathLike, **options) -> None:
    """Write the schedule's MSCCL XML atomically; options as for `to_xml`."""
    write_atomic(path, to_xml(schedule, **options))
