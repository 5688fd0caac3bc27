"""The schedule IR: `Transfer` rows, stored column-wise in a `Schedule`.

Semantics (design §3.3, fixed): every rank holds one buffer per chunk. Transfers are grouped in
steps; within a step every transfer reads its source buffer as it was at the start of the
step. `reduce` adds the payload into the destination buffer, `copy` replaces it. What the
buffers hold before and must hold after is the collective's (`kinds`): for AllReduce, the
default, each starts with its rank's data and ends with the sum over all ranks.

A schedule keeps its transfers as numpy columns (step, chunk, src, dst, op, path id) and a
table of distinct paths, because schedules of millions of transfers are common (a ring over
1,024 ranks has two million) and Python objects per transfer would dominate every consumer.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from arsched.collective.kinds import Collective
from arsched.errors import ScheduleFormatError
from arsched.topology.core import Topology, is_int

MAX_CHANNELS = 32  # NCCL's and MSCCL's channels per communicator

OPS = ("reduce", "copy")
REDUCE, COPY = 0, 1


@dataclass(frozen=True)
class Transfer:
    """One chunk moving from rank `src` to rank `dst` along `path` in step `step`."""

    step: int
    chunk: int
    src: str
    dst: str
    op: str = "reduce"
    path: tuple[str, ...] = ()


@dataclass(eq=False)
class Schedule:
    """A collective (`collective`, default AllReduce; `root` a rank for broadcast and reduce) of
    `nbytes` per rank over `ranks`, split into `num_chunks` equal chunks.

    Column arrays, one entry per transfer: `step`, `chunk`, `src`/`dst` (node indices into
    `topology.compiled.node_ids`), `op` (0 reduce, 1 copy) and `path_id` (into `paths`).
    Build one with `Schedule.from_transfers` or a `ScheduleBuilder`; check it with
    `arsched.collective.validate`.

    `channels` (1 to `MAX_CHANNELS`): how many connections, channels, a rank pair has, as a
    runtime opens several (NCCL channels, MSCCL's `chan`); a transfer of step s goes on channel
    s mod `channels` (`connections`), and each channel carries its steps in order. Data
    dependencies do not depend on it; with two, a pair's transfers of step s + 1 may start (and
    pay their overhead) while those of step s still send.
    """

    topology: Topology
    ranks: tuple[str, ...]
    nbytes: float
    num_chunks: int
    step: np.ndarray
    chunk: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    op: np.ndarray
    path_id: np.ndarray
    paths: tuple[tuple[str, ...], ...]
    algorithm: str = "custom"
    meta: dict[str, Any] = field(default_factory=dict)
    collective: str = "allreduce"
    root: str | None = None
    channels: int = 1

    def __post_init__(self) -> None:
        self.ranks = tuple(self.ranks)
        if not (is_int(self.channels) and 1 <= self.channels <= MAX_CHANNELS):
            raise ScheduleFormatError(
                f"a schedule has 1 to {MAX_CHANNELS} channels per rank pair, not {self.channels!r}"
            )
        self.channels = int(self.channels)
        cols = ("step", "chunk", "src", "dst", "op", "path_id")
        dtypes = (np.int64, np.int64, np.int32, np.int32, np.int8, np.int32)
        for name, dt in zip(cols, dtypes, strict=True):
            setattr(self, name, np.ascontiguousarray(getattr(self, name), dtype=dt))
        n = len(self.step)
        if any(len(getattr(self, c)) != n for c in cols):
            raise ScheduleFormatError("schedule columns step, chunk, src, dst, op, path_id differ in length")
        if n and (self.path_id.min() < 0 or self.path_id.max() >= len(self.paths)):
            raise ScheduleFormatError("a transfer refers to a path that is not in the path table")
        if n and (self.op.min() < 0 or self.op.max() > 1):
            raise ScheduleFormatError("an op code is not 0 (reduce) or 1 (copy)")

    # ---- size and shape ----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.step)

    @property
    def num_ranks(self) -> int:
        return len(self.ranks)

    @property
    def num_steps(self) -> int:
        """Number of distinct steps used."""
        return len(np.unique(self.step))

    @property
    def kind(self) -> Collective:
        """The collective with the root as a rank index (-1 for a root that is not a rank)."""
        root = None if self.root is None else (self.ranks.index(self.root) if self.root in self.ranks else -1)
        return Collective(self.collective, self.num_ranks, self.num_chunks, root)

    @property
    def chunk_bytes(self) -> float:
        """One chunk's bytes: `nbytes` over the chunks of one rank's buffer (`kinds.per_buffer`)."""
        return self.nbytes / max(self.kind.per_buffer, 1)

    @property
    def rank_nodes(self) -> np.ndarray:
        """Node indices of the ranks (-1 for a rank that is not a node of the topology)."""
        index = self.topology.compiled.index
        return np.array([index.get(r, -1) for r in self.ranks], dtype=np.int64)

    @property
    def rank_of_node(self) -> np.ndarray:
        """Rank index of every topology node, -1 for nodes that are not ranks."""
        out = np.full(self.topology.compiled.num_nodes, -1, dtype=np.int64)
        nodes = self.rank_nodes
        ok = nodes >= 0
        out[nodes[ok]] = np.flatnonzero(ok)
        return out

    def connections(self) -> tuple[np.ndarray, int]:
        """Every transfer's connection, (source node, destination node, channel) as one number,
        and how many there can be: a runtime carries each connection's steps in order."""
        nodes = self.topology.compiled.num_nodes
        key = self.src.astype(np.int64) * nodes + self.dst
        if self.channels > 1:
            key = key * self.channels + np.mod(self.step, self.channels)
        return key, nodes * nodes * self.channels

    # ---- row access ----------------------------------------------------------------------------
    def transfer(self, i: int) -> Transfer:
        """Transfer number i (in stored order) as a `Transfer`."""
        ids = self.topology.compiled.node_ids
        return Transfer(
            int(self.step[i]),
            int(self.chunk[i]),
            ids[self.src[i]],
            ids[self.dst[i]],
            OPS[self.op[i]],
            self.paths[self.path_id[i]],
        )

    def __iter__(self) -> Iterator[Transfer]:
        return (self.transfer(i) for i in range(len(self)))

    @property
    def transfers(self) -> list[Transfer]:
        return list(self)

    def __repr__(self) -> str:
        return (
            f"Schedule({self.algorithm!r} on {self.topology.name}, ranks={self.num_ranks}, "
            f"bytes={self.nbytes:g}, chunks={self.num_chunks}, transfers={len(self)}"
            + ("" if self.collective == "allreduce" else f", {self.collective}")
            + ("" if self.root is None else f", root={self.root}")
            + ")"
        )

    # ---- construction --------------------------------------------------------------------------
    @classmethod
    def from_transfers(
        cls,
        topology: Topology,
        ranks: Sequence[str],
        nbytes: float,
        num_chunks: int,
        transfers: Iterable[Transfer | dict[str, Any]],
        algorithm: str = "custom",
        meta: dict[str, Any] | None = None,
        collective: str = "allreduce",
        root: str | None = None,
    ) -> Schedule:
        """A schedule from Transfer objects (or dicts with the same keys).

        A transfer without a path takes the topology's default route.
        """
        b = ScheduleBuilder(
            topology, ranks, nbytes, num_chunks, algorithm, meta, collective=collective, root=root
        )
        for i, t in enumerate(transfers):
            if isinstance(t, dict):
                try:
                    t = Transfer(
                        t["step"],
                        t["chunk"],
                        t["src"],
                        t["dst"],
                        t.get("op", "reduce"),
                        tuple(t.get("path") or ()),
                    )
                except KeyError as e:
                    raise ScheduleFormatError(f"transfer {i} has no {e.args[0]!r}") from None
            b.add(t.step, t.chunk, t.src, t.dst, t.op, t.path or None, where=f"transfer {i}")
        return b.build()


class ScheduleBuilder:
    """Accumulates transfers for a Schedule; algorithms use it to emit rows cheaply.

    Ranks are given as node ids (`add`) or as rank indices in bulk (`add_rank_arrays`). A
    missing path is filled with the topology's default route, interned once per (src, dst), or
    with `spread` with the route spread over equal-cost paths at switches
    (`Router.link_paths(spread=True)`: d-mod-k on fat-trees, as a fabric's ECMP spreads flows),
    so that schedules with many rank pairs at once do not all cross the lowest-index switch.
    With `multipath` k > 1 (and `spread`), a pair's transfers take in turn, in the order they
    are added, the routes `Router.striped_paths` keeps among its first k spread ones (those
    that add capacity): one connection striped over a dual-plane NIC's two ports, or over
    spines whose links are slower than the NIC, as a runtime does with several queue pairs per
    connection (one route per pair reaches half a two-port NIC's rate). `channels` as in
    `Schedule`.
    """

    def __init__(
        self,
        topology: Topology,
        ranks: Sequence[str] | None,
        nbytes: float,
        num_chunks: int,
        algorithm: str = "custom",
        meta: dict[str, Any] | None = None,
        spread: bool = False,
        collective: str = "allreduce",
        root: str | None = None,
        multipath: int = 1,
        channels: int = 1,
    ) -> None:
        self.topology = topology
        self.channels = channels
        self.spread = spread
        if not (is_int(multipath) and multipath >= 1):
            raise ScheduleFormatError(f"multipath must be a positive integer, got {multipath!r}")
        self.multipath = int(multipath) if spread else 1
        # multipath: sorted pair codes, their distinct routes' path ids (padded with −1), how
        # many, and each pair's next turn
        empty = np.zeros(0, dtype=np.int64)
        self._stripes = (empty, np.zeros((0, self.multipath), dtype=np.int64), empty, empty)
        self.collective, self.root = collective, root
        self.ranks = tuple(topology.servers if ranks is None else ranks)
        try:
            self.nbytes = float(nbytes)
            self.num_chunks = int(num_chunks)
        except (TypeError, ValueError):
            raise ScheduleFormatError("schedule bytes and num_chunks must be numbers") from None
        self.algorithm = algorithm
        self.meta = dict(meta or {})
        self._index = topology.compiled.index
        self._cols: list[list[np.ndarray]] = [[] for _ in range(6)]
        self._rows: list[list[int]] = [[] for _ in range(6)]
        self._path_ids: dict[tuple[str, ...], int] = {}
        self._default: dict[tuple[int, int], int] = {}
        self._rank_nodes: np.ndarray | None = None
        self._code_cache = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))

    def _node(self, name: str, where: str) -> int:
        try:
            return self._index[name]
        except KeyError:
            raise ScheduleFormatError(
                f"{where} names node {name!r}, which is not in topology {self.topology.name}"
            ) from None

    def intern_path(self, path: Sequence[str]) -> int:
        """The id of a path in the path table, adding it if new."""
        p = tuple(path)
        pid = self._path_ids.get(p)
        if pid is None:
            pid = self._path_ids[p] = len(self._path_ids)
        return pid

    def _default_path(self, s: int, d: int) -> int:
        key = (s, d)
        pid = self._default.get(key)
        if pid is None:
            if self.spread and s != d:
                self._spread_paths(np.array([s]), np.array([d]))
                return self._default[key]
            ids = self.topology.compiled.node_ids
            path = (ids[s], ids[d]) if s == d else self.topology.path(ids[s], ids[d])
            pid = self._default[key] = self.intern_path(path)
        return pid

    def _spread_paths(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Intern the spread routes of many node pairs in one vectorised routing call, and
        return their path ids (a node paired with itself: its default path to itself); they
        become the pairs' default routes."""
        far = src != dst
        ptr, links = self.topology.router.link_paths(src[far], dst[far], spread=True)
        found = self._intern_routes(src[far], ptr, links)
        self._default.update(zip(zip(src[far].tolist(), dst[far].tolist(), strict=True), found, strict=True))
        out = np.empty(len(src), dtype=np.int64)
        out[far] = found
        out[~far] = [self._default_path(s, d) for s, d in zip(src[~far], dst[~far], strict=True)]
        return out

    def _intern_routes(self, src: np.ndarray, ptr: np.ndarray, links: np.ndarray) -> list[int]:
        """The path ids (interned) of routes from the nodes `src` over links (CSR `ptr`, `links`)."""
        c = self.topology.compiled
        starts = ptr[:-1] + np.arange(len(ptr) - 1)  # each path's first node, its source
        nodes = np.empty(len(links) + len(starts), dtype=np.int64)
        hop = np.ones(len(nodes), dtype=bool)
        hop[starts] = False
        nodes[starts], nodes[hop] = src, c.link_dst[links]
        names = np.asarray(c.node_ids, dtype=object)[nodes].tolist()
        bounds = np.append(starts, len(nodes)).tolist()
        interned = self._path_ids
        return [interned.setdefault(tuple(names[a:b]), len(interned)) for a, b in itertools.pairwise(bounds)]

    def add(
        self,
        step: int,
        chunk: int,
        src: str,
        dst: str,
        op: str = "reduce",
        path: Sequence[str] | None = None,
        where: str = "a transfer",
    ) -> None:
        """Append one transfer; `path=None` takes the default route."""
        if op not in OPS:
            raise ScheduleFormatError(f"{where} has op {op!r}; it must be 'reduce' or 'copy'")
        if not (is_int(step) and is_int(chunk)):
            raise ScheduleFormatError(f"{where} has a non-integer step or chunk ({step!r}, {chunk!r})")
        step_i, chunk_i = int(step), int(chunk)
        if path is not None and (isinstance(path, str) or not all(isinstance(n, str) for n in path)):
            raise ScheduleFormatError(f"{where} has a path that is not a list of node ids")
        s, d = self._node(src, where), self._node(dst, where)
        if path is not None:
            pid = self.intern_path(path)
        elif self.multipath > 1 and s != d:
            pid = int(self._striped(np.array([s]), np.array([d]))[0])
        else:
            pid = self._default_path(s, d)
        for col, v in zip(self._rows, (step_i, chunk_i, s, d, OPS.index(op), pid), strict=True):
            col.append(v)

    def add_rank_arrays(
        self,
        step: np.ndarray | int,
        chunk: np.ndarray | int,
        src_rank: np.ndarray,
        dst_rank: np.ndarray,
        op: str = "reduce",
        path_ids: np.ndarray | None = None,
    ) -> None:
        """Append many transfers at once, ranks given by index (vectorised), on default routes
        or on the paths `path_ids` (ids from `intern_path`, one per transfer)."""
        if self._rank_nodes is None:
            self._rank_nodes = np.array([self._node(r, "the rank list") for r in self.ranks], dtype=np.int64)
        s = self._rank_nodes[np.asarray(src_rank)]
        d = self._rank_nodes[np.asarray(dst_rank)]
        n = len(s)
        if path_ids is None and self.multipath > 1:
            s, d = np.broadcast_arrays(s, d)
            path_ids = self._striped(s.ravel(), d.ravel()).reshape(s.shape)
        elif path_ids is None:
            num_nodes = self.topology.compiled.num_nodes
            codes, inverse = np.unique(s * num_nodes + d, return_inverse=True)
            path_ids = self._lookup_codes(codes, num_nodes)[inverse.ravel()]
        cols = (
            np.broadcast_to(np.asarray(step, dtype=np.int64), (n,)),
            np.broadcast_to(np.asarray(chunk, dtype=np.int64), (n,)),
            s,
            d,
            np.full(n, OPS.index(op), dtype=np.int64),
            np.broadcast_to(np.asarray(path_ids, dtype=np.int64), (n,)),
        )
        self._flush_rows()
        for store, col in zip(self._cols, cols, strict=True):
            store.append(np.asarray(col, dtype=np.int64))

    def ways(self, src_rank: np.ndarray, dst_rank: np.ndarray) -> np.ndarray:
        """How many distinct routes the pairs src_rank[i] → dst_rank[i] (rank indices) take in
        turn under `multipath` (1 for every pair without it)."""
        if self.multipath == 1 or not self.topology.router.may_stripe:
            return np.ones(len(np.asarray(src_rank)), dtype=np.int64)
        if self._rank_nodes is None:
            self._rank_nodes = np.array([self._node(r, "the rank list") for r in self.ranks], dtype=np.int64)
        num_nodes = self.topology.compiled.num_nodes
        codes = self._rank_nodes[np.asarray(src_rank)] * num_nodes + self._rank_nodes[np.asarray(dst_rank)]
        rows = self._stripe_rows(codes)  # may route new pairs: `_stripes` is read after
        return self._stripes[2][rows]

    def _stripe_rows(self, codes: np.ndarray) -> np.ndarray:
        """The rows of pair codes (src * num_nodes + dst) in `_stripes`, routing new ones."""
        known = self._stripes[0]
        pos = np.searchsorted(known, codes).clip(max=max(len(known) - 1, 0))
        if len(known) and (known[pos] == codes).all():
            return pos
        self._add_stripes(np.setdiff1d(codes, known), self.topology.compiled.num_nodes)
        return np.searchsorted(self._stripes[0], codes)

    def _striped(self, s: np.ndarray, d: np.ndarray) -> np.ndarray:
        """Path ids of transfers s[i] → d[i] (node indices) under `multipath`: each pair's next
        distinct route in turn (see the class docstring)."""
        codes, inverse = np.unique(s * self.topology.compiled.num_nodes + d, return_inverse=True)
        inverse = inverse.ravel()
        pos = self._stripe_rows(codes)
        _, ids, ways, turn = self._stripes
        # the i-th transfer of a pair in this call takes the pair's turn + i
        order = np.argsort(inverse, kind="stable")
        first = np.searchsorted(inverse[order], np.arange(len(codes)))
        occurrence = np.empty(len(inverse), dtype=np.int64)
        occurrence[order] = np.arange(len(inverse)) - first[inverse[order]]
        row = pos[inverse]
        out = ids[row, (turn[row] + occurrence) % ways[row]]
        turn[pos] += np.bincount(inverse, minlength=len(codes))
        return out

    def _add_stripes(self, codes: np.ndarray, num_nodes: int) -> None:
        """Route new pair codes under every salt and keep each pair's distinct routes (path ids,
        in salt order, padded with −1) where together they carry more than the first alone (a
        dual-plane NIC's two ports); elsewhere (spines above a single port) only the first, and
        only kept routes enter the path table."""
        a, b = np.divmod(codes, num_nodes)
        variants = np.full((len(codes), self.multipath), -1, dtype=np.int64)
        far = np.flatnonzero(a != b)
        variants[a == b, 0] = [self._default_path(x, x) for x in a[a == b].tolist()]
        if len(far):
            ptr, keep, routes = self.topology.router.striped_paths(a[far], b[far], self.multipath)
            hops = np.diff(ptr)
            for k, links in enumerate(routes):  # salt 0's routes for every pair first, as unstriped
                rows = np.flatnonzero(keep[:, k])
                sub_ptr = np.concatenate([[0], np.cumsum(hops[rows])])
                idx = np.repeat(ptr[rows] - sub_ptr[:-1], hops[rows]) + np.arange(sub_ptr[-1])
                variants[far[rows], k] = self._intern_routes(a[far[rows]], sub_ptr, links[idx])
            pairs = zip(a[far].tolist(), b[far].tolist(), strict=True)
            self._default.update(zip(pairs, variants[far, 0].tolist(), strict=True))
        variants = np.take_along_axis(variants, np.argsort(variants < 0, axis=1, kind="stable"), axis=1)
        known, ids, ways, turn = self._stripes
        merged = np.concatenate([known, codes])
        order = np.argsort(merged, kind="stable")
        self._stripes = (
            merged[order],
            np.concatenate([ids, variants])[order],
            np.concatenate([ways, (variants >= 0).sum(axis=1)])[order],
            np.concatenate([turn, np.zeros(len(codes), dtype=np.int64)])[order],
        )

    def _lookup_codes(self, codes: np.ndarray, num_nodes: int) -> np.ndarray:
        """Path ids of sorted unique pair codes src*num_nodes+dst, routing only new pairs."""
        known, known_pids = self._code_cache
        pos = np.searchsorted(known, codes).clip(max=max(len(known) - 1, 0))
        hit = (known[pos] == codes) if len(known) else np.zeros(len(codes), dtype=bool)
        new = codes[~hit]
        if len(new):
            ids = self.topology.compiled.node_ids
            self.topology.router.prepare(ids[x] for x in np.unique(new % num_nodes))
            if self.spread:
                new_pids = self._spread_paths(*np.divmod(new, num_nodes))
            else:
                pairs = (divmod(int(x), num_nodes) for x in new)
                new_pids = np.array([self._default_path(*pair) for pair in pairs], dtype=np.int64)
            merged = np.concatenate([known, new])
            order = np.argsort(merged, kind="stable")
            self._code_cache = (merged[order], np.concatenate([known_pids, new_pids])[order])
            return self._lookup_codes(codes, num_nodes)
        return known_pids[pos]

    def _flush_rows(self) -> None:
        if self._rows[0]:
            for store, rows in zip(self._cols, self._rows, strict=True):
                store.append(np.asarray(rows, dtype=np.int64))
                rows.clear()

    def build(self) -> Schedule:
        """The Schedule of everything added so far."""
        self._flush_rows()
        cols = [np.concatenate(c) if c else np.zeros(0, dtype=np.int64) for c in self._cols]
        return Schedule(
            self.topology,
            self.ranks,
            self.nbytes,
            self.num_chunks,
            *cols,
            paths=tuple(self._path_ids),
            algorithm=self.algorithm,
            meta=self.meta,
            collective=self.collective,
            root=self.root,
            channels=self.channels,
        )
