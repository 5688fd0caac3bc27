"""The validator: proves a schedule computes its collective under the design §3.3 semantics.

`validate` is symbolic: every buffer (rank, chunk) carries the set of ranks whose data it
holds, as a row of 64-bit words, plus one bit for data nobody provided (a buffer that starts
with nothing usable, `kinds.NOTHING`), and each step is applied with numpy over all its
transfers at once (gather payloads at the start of the step, OR the reduces grouped by
destination, overwrite the copies). A double count shows up as a popcount that does not add
up. At the end every buffer the collective's goal names must hold exactly that: the sum over
all ranks, or one rank's data. The first violation is reported in plain words; a million
transfers take about a second. Chunks never mix, so they are checked in blocks whose state
fits `BLOCK_BYTES`; the first violation is then the earliest step's over all blocks.

`numeric_check` runs the schedule on random float64 vectors (NaN where a buffer starts with
nothing usable) and compares with the true sums: an independent second opinion.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from arsched.collective.kinds import EVERYONE, NOTHING, Collective
from arsched.collective.schedule import COPY, OPS, Schedule
from arsched.errors import ArschedError
from arsched.limits import VALIDATOR_BLOCK_BYTES


class InvalidScheduleError(ArschedError):
    """A schedule violates its collective's semantics; the message names the first violation."""


@dataclass(frozen=True)
class ValidationReport:
    """Outcome of a check: `ok`, and otherwise the `kind` of violation, a `message` in plain
    words and the index of the offending `transfer` (in stored order) when there is one."""

    ok: bool
    message: str
    kind: str | None = None
    transfer: int | None = None
    num_transfers: int = 0
    num_steps: int = 0

    def __bool__(self) -> bool:
        return self.ok

    def raise_if_invalid(self) -> None:
        if not self.ok:
            raise InvalidScheduleError(self.message)


def _describe(s: Schedule, i: int) -> str:
    t = s.transfer(i)
    return f"transfer {i} (step {t.step}, chunk {t.chunk}, {t.op} {t.src}->{t.dst})"


def _fail(s: Schedule, kind: str, i: int | None, text: str) -> ValidationReport:
    where = _describe(s, i) + ": " if i is not None else ""
    return ValidationReport(False, where + text, kind, i, len(s), s.num_steps if len(s) else 0)


def _first(mask: np.ndarray) -> int | None:
    hits = np.flatnonzero(mask)
    return int(hits[0]) if len(hits) else None


def _check_header(s: Schedule) -> ValidationReport | None:
    topo = s.topology
    if not s.ranks:
        return _fail(s, "no-ranks", None, "the schedule has no ranks")
    if len(set(s.ranks)) != len(s.ranks):
        dup = next(r for r in s.ranks if s.ranks.count(r) > 1)
        return _fail(s, "duplicate-rank", None, f"rank {dup} is listed twice")
    for r in s.ranks:
        if r not in topo:
            return _fail(s, "unknown-rank", None, f"rank {r} is not a node of {topo.name}")
        if topo.kind(r) != "server":
            return _fail(s, "not-a-server", None, f"rank {r} is a switch, and switches hold no data")
    if s.num_chunks < 1:
        return _fail(s, "bad-chunks", None, f"num_chunks is {s.num_chunks}; it must be at least 1")
    if not (s.nbytes > 0 and np.isfinite(s.nbytes)):
        return _fail(s, "bad-bytes", None, f"bytes is {s.nbytes}; it must be a positive number")
    if s.root is not None and s.root not in s.ranks:
        return _fail(s, "bad-root", None, f"the root {s.root} is not one of the ranks")
    problem = s.kind.problem()
    if problem is not None:
        return _fail(s, "bad-collective", None, problem)
    return None


def _path_problems(s: Schedule) -> list[str | None]:
    """Per path in the table: None if it is a simple path over existing links, else why not.
    The links of every path are looked up at once (a sharded PS over 1,024 ranks has a million
    paths); only a path with a problem is looked at on its own."""
    c = s.topology.compiled
    hops, links = c.paths_links(s.paths)
    ptr = np.concatenate([[0], np.cumsum(hops)])
    missing = np.zeros(len(s.paths), dtype=bool)
    missing[np.repeat(np.arange(len(s.paths)), hops)[links < 0]] = True
    out: list[str | None] = []
    for i, p in enumerate(s.paths):
        if len(p) < 2:
            out.append("its path has fewer than two nodes")
        elif len(set(p)) != len(p):
            out.append("its path visits a node twice: " + " -> ".join(p))
        elif not missing[i]:
            out.append(None)
        else:
            bad = int(np.flatnonzero(links[ptr[i] : ptr[i + 1]] < 0)[0])
            if p[bad] not in c.index or p[bad + 1] not in c.index:
                unknown = p[bad] if p[bad] not in c.index else p[bad + 1]
                out.append(f"its path names {unknown!r}, which is not in {s.topology.name}")
            else:
                out.append(f"its path uses {p[bad]}->{p[bad + 1]}, which is not a link of {s.topology.name}")
    return out


def _check_rows(s: Schedule) -> ValidationReport | None:
    """Per-transfer checks that need no state: ranges, endpoints, paths."""
    c = s.topology.compiled
    rank_of = s.rank_of_node
    checks = [
        (s.step < 0, "bad-step", lambda i: f"step {s.step[i]} is negative"),
        (
            (s.chunk < 0) | (s.chunk >= s.num_chunks),
            "bad-chunk",
            lambda i: f"chunk {s.chunk[i]} is outside 0..{s.num_chunks - 1}",
        ),
        (rank_of[s.src] < 0, "not-a-rank", lambda i: f"source {c.node_ids[s.src[i]]} is not a rank"),
        (rank_of[s.dst] < 0, "not-a-rank", lambda i: f"destination {c.node_ids[s.dst[i]]} is not a rank"),
        (s.src == s.dst, "self-transfer", lambda i: "source and destination are the same rank"),
    ]
    first_node = np.array([c.index.get(p[0], -1) if p else -1 for p in s.paths], dtype=np.int64)
    last_node = np.array([c.index.get(p[-1], -1) if p else -1 for p in s.paths], dtype=np.int64)
    if len(s.paths):
        checks.append(
            (
                (first_node[s.path_id] != s.src) | (last_node[s.path_id] != s.dst),
                "bad-path",
                lambda i: (
                    "its path "
                    + " -> ".join(s.paths[s.path_id[i]])
                    + " does not run from source to destination"
                ),
            )
        )
        problems = _path_problems(s)
        broken = np.array([p is not None for p in problems])
        checks.append((broken[s.path_id], "missing-link", lambda i: problems[s.path_id[i]]))
    found = [(i, kind, text) for mask, kind, text in checks if (i := _first(mask)) is not None]
    if not found:
        return None
    i, kind, text = min(found, key=lambda f: f[0])
    return _fail(s, kind, i, text(i))


def _popcount(words: np.ndarray) -> np.ndarray:
    return np.bitwise_count(words).sum(axis=-1, dtype=np.int64)


def _names(s: Schedule, words: np.ndarray) -> str:
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")[: s.num_ranks]
    names = [s.ranks[i] for i in np.flatnonzero(bits)]
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def _apply_step(
    s: Schedule,
    rows: np.ndarray,
    src_buf: np.ndarray,
    dst_buf: np.ndarray,
    state: np.ndarray,
    data: np.ndarray | None = None,
) -> ValidationReport | None:
    """Apply one step to the symbolic state, or report its first violation (stored order).
    `data` masks the ranks' bits where the state may also carry the nothing-usable bit: adding
    unusable data twice is no double count (it is caught at the end, wherever it lands)."""
    payload = state[src_buf]
    is_copy = s.op[rows] == COPY
    if is_copy.any():
        cdst = dst_buf[is_copy]
        crow = rows[is_copy]
        order = np.lexsort((crow, cdst))  # by buffer, then stored order
        repeat = np.flatnonzero(cdst[order][1:] == cdst[order][:-1]) + 1
        if len(repeat):
            # the earliest (in stored order) copy that is not the first into its buffer
            i = int(crow[order][repeat].min())
            return _fail(s, "double-copy", i, "a second copy into the same buffer in one step")
        clash = is_copy & np.isin(dst_buf, dst_buf[~is_copy])
        if clash.any():
            i = int(rows[clash].min())
            return _fail(s, "copy-and-reduce", i, "the step both copies and reduces into this buffer")
    red = ~is_copy
    if not red.any():
        state[dst_buf] = payload
        return None
    r_rows, r_dst, r_pay = rows[red], dst_buf[red], payload[red]
    order = np.argsort(r_dst, kind="stable")
    sd = r_dst[order]
    starts = np.flatnonzero(np.r_[True, sd[1:] != sd[:-1]])
    union = np.bitwise_or.reduceat(r_pay[order], starts, axis=0)
    groups = sd[starts]
    before = state[groups]
    if data is None:
        added = np.add.reduceat(_popcount(r_pay[order]), starts)
        bad = _popcount(union | before) != _popcount(before) + added
    else:
        added = np.add.reduceat(_popcount(r_pay[order] & data), starts)
        bad = _popcount((union | before) & data) != _popcount(before & data) + added
    if not bad.any():
        state[groups] = union | before
        state[dst_buf[is_copy]] = payload[is_copy]
        return None
    # replay the offending groups in stored order to name the first transfer that double counts
    culprits = []
    for g in np.flatnonzero(bad):
        acc = state[groups[g]].copy()
        for k in np.sort(np.flatnonzero(r_dst == groups[g])):
            overlap = acc & r_pay[k] if data is None else acc & r_pay[k] & data
            if overlap.any():
                culprits.append((int(r_rows[k]), overlap))
                break
            acc |= r_pay[k]
    i, overlap = min(culprits, key=lambda x: x[0])
    return _fail(s, "double-count", i, f"it adds the data of {_names(s, overlap)} a second time")


def _static_problem(s: Schedule) -> ValidationReport | None:
    """The first problem that needs no execution: header, ranges, endpoints, paths."""
    problem = _check_header(s)
    return _check_rows(s) if problem is None else problem


@dataclass(frozen=True)
class _Layout:
    """Where each transfer's buffers sit in the state arrays: rows rank * `chunks` + position.

    The state holds every chunk while there are no more chunks than transfers (positions are the
    chunk ids). With more chunks than transfers (a file may claim 10^18), it holds only the
    chunks some transfer touches, in id order: `ids` maps a position to its chunk id, and `gap`
    is the first chunk no transfer touches that the collective needs moved (its buffers keep
    what they started with, short of the goal)."""

    src_buf: np.ndarray
    dst_buf: np.ndarray
    step_rows: list[np.ndarray]  # transfer indices of each step, in step order (stored order within)
    chunks: int
    ids: np.ndarray | None = None
    gap: int | None = None

    @property
    def chunk_ids(self) -> np.ndarray:
        """The chunk id of every position."""
        return np.arange(self.chunks) if self.ids is None else self.ids

    def row(self, rank: int, chunk: int) -> int | None:
        """The state row of buffer (rank, chunk id); None for a chunk no transfer touches."""
        if self.ids is None:
            return rank * self.chunks + chunk
        k = int(np.searchsorted(self.ids, chunk))
        return rank * self.chunks + k if k < len(self.ids) and self.ids[k] == chunk else None

    def first_short(
        self, short: np.ndarray, kind: Collective, found: tuple[int, int] | None = None
    ) -> tuple[int, int] | None:
        """(rank, chunk id) of the first buffer, rank-major, that misses its goal: a row of the
        state flagged in `short`, `found` (one already known), or (the first rank that misses
        it, `gap`)."""
        row = _first(short)
        if found is None and row is not None:
            found = divmod(row, self.chunks)
            if self.ids is not None:
                found = (found[0], int(self.ids[found[1]]))
        if self.gap is not None:
            one = np.array([self.gap])
            rank = _first((kind.goal(one) != NOTHING) & (kind.goal(one) != kind.start(one)))
            if rank is not None and (found is None or (rank, self.gap) < found):
                found = (rank, self.gap)
        return found


def _layout(s: Schedule) -> _Layout:
    rank_of = s.rank_of_node
    ids, gap, chunk, chunks = None, None, s.chunk, s.num_chunks
    if s.num_chunks > len(s):
        ids, chunk = np.unique(s.chunk, return_inverse=True)
        chunks = len(ids)
        gap = s.kind.first_unmoved(ids)
    order = np.argsort(s.step, kind="stable")
    steps = s.step[order]
    cuts = np.flatnonzero(steps[1:] != steps[:-1]) + 1
    return _Layout(
        rank_of[s.src] * chunks + chunk,
        rank_of[s.dst] * chunks + chunk,
        np.split(order, cuts) if len(order) else [],
        chunks,
        ids,
        gap,
    )


def _bits(who: np.ndarray, n: int, words: int) -> np.ndarray:
    """Rows of bit sets: rank r's bit for `who` = r, every rank's for EVERYONE, bit n (data
    nobody provided) for NOTHING."""
    out = np.zeros((len(who), words), dtype=np.uint64)
    one = who >= 0
    pos = np.where(one, who, n)
    single = one | (who == NOTHING)
    out[np.flatnonzero(single), pos[single] // 64] = np.left_shift(
        np.uint64(1), (pos[single] % 64).astype(np.uint64)
    )
    out[who == EVERYONE] = _everyone(n, words)
    return out


def _everyone(n: int, words: int) -> np.ndarray:
    """The bit set of all n ranks."""
    full = np.zeros(words, dtype=np.uint64)
    full_bits = np.packbits(np.ones(n, dtype=np.uint8), bitorder="little")
    full.view(np.uint8)[: len(full_bits)] = full_bits
    return full


BLOCK_BYTES = VALIDATOR_BLOCK_BYTES
"""The most symbolic state held at once. A transfer reads and writes buffers of one chunk, so
chunks are checked block by block (a 4,096-rank ring: 4,096 chunks of 4,096 ranks' bits, 8.6 GB
at once; 64 chunks, 134 MB, at a time)."""


def validate(schedule: Schedule) -> ValidationReport:
    """Check a schedule symbolically; the report names the first violation or says it is valid."""
    s = schedule
    problem = _static_problem(s)
    if problem is not None:
        return problem
    n, kind = s.num_ranks, s.kind
    lay = _layout(s)
    ids = lay.chunk_ids
    unusable = bool((kind.start(ids) == NOTHING).any())
    words = (n + unusable + 63) // 64  # the ranks' bits, and the nothing-usable bit where needed
    width = max(1, BLOCK_BYTES // (n * words * 8))  # chunks per block
    position = lay.src_buf % lay.chunks
    order = np.argsort(position // width, kind="stable")  # each block's transfers in stored order
    cuts = np.searchsorted((position // width)[order], np.arange(1, -(-lay.chunks // width)))
    failures, shorts = [], []
    for b, rows in enumerate(np.split(order, cuts)):
        failed, short = _check_block(
            s, lay, rows, b * width, min((b + 1) * width, lay.chunks), words, unusable
        )
        if failed is not None:
            failures.append(failed)
        elif short is not None and not failures:
            shorts.append(short)
    if failures:  # the earliest step that fails in any block; in it, as one step would be checked
        return min(failures, key=lambda f: f[0])[1]
    first = min(shorts, key=lambda x: x[0], default=None)
    missed = lay.first_short(np.zeros(0, dtype=bool), kind, None if first is None else first[0][:2])
    if missed is not None:
        r, ch = missed
        if first is not None and missed == first[0][:2]:
            held = first[1]
        else:  # a chunk no transfer touches: its buffers hold what they started with
            held = _bits(kind.start(np.array([ch]))[r], n, words)[0]
        goal = int(kind.goal(np.array([ch]))[r, 0])
        return _fail(s, "incomplete", None, _shortfall(s, r, ch, held, goal, words))
    steps = len(lay.step_rows)
    return ValidationReport(
        True,
        f"valid {kind.title}: {n} ranks, {s.num_chunks} chunks, {len(s)} transfers in {steps} steps",
        None,
        None,
        len(s),
        steps,
    )


def _check_block(
    s: Schedule, lay: _Layout, rows: np.ndarray, lo: int, hi: int, words: int, unusable: bool
) -> tuple[tuple | None, tuple | None]:
    """Run the transfers `rows` (all of chunk positions lo..hi−1, in stored order) on those
    chunks' buffers. Returns ((step, check, transfer), report) for the first violation, or the
    first buffer short of its goal, rank-major, as ((rank, chunk id), what it holds)."""
    n, kind = s.num_ranks, s.kind
    ids = lay.chunk_ids[lo:hi]
    span = hi - lo
    state = _bits(kind.start(ids).ravel(), n, words)
    data = _everyone(n, words) if unusable else None
    src = lay.src_buf[rows] // lay.chunks * span + lay.src_buf[rows] % lay.chunks - lo
    dst = lay.dst_buf[rows] // lay.chunks * span + lay.dst_buf[rows] % lay.chunks - lo
    by_step = np.argsort(s.step[rows], kind="stable")
    steps = s.step[rows][by_step]
    for part in np.split(by_step, np.flatnonzero(steps[1:] != steps[:-1]) + 1) if len(rows) else []:
        problem = _apply_step(s, rows[part], src[part], dst[part], state, data)
        if problem is not None:
            check = _CHECKS.index(problem.kind)
            return ((int(s.step[rows[part[0]]]), check, problem.transfer), problem), None
    goal = kind.goal(ids).ravel()
    short = (goal == EVERYONE) & (state != _everyone(n, words)).any(axis=1)
    one = np.flatnonzero(goal >= 0)
    short[one] = (state[one] != _bits(goal[one], n, words)).any(axis=1)
    row = _first(short)
    if row is None:
        return None, None
    r, k = divmod(row, span)
    return None, ((r, int(ids[k]), lo + k), state[row])


_CHECKS = ("double-copy", "copy-and-reduce", "double-count")
"""The order in which one step's checks run (`_apply_step`): within a step, the first check that
fails is reported."""


def _shortfall(s: Schedule, r: int, ch: int, held: np.ndarray, goal: int, words: int) -> str:
    """What buffer (rank r, chunk ch) holds at the end instead of its goal, in words. A goal of
    one rank's data can only be missed by holding unusable data: no other rank ever holds data
    of that chunk (`kinds`), and no buffer is ever empty."""
    n = s.num_ranks
    where = f"at the end rank {s.ranks[r]} holds chunk {ch}"
    if goal == EVERYONE:
        missing = _everyone(n, words) & ~held
        return f"{where} summed over {int(_popcount(held))} of {n} ranks (missing {_names(s, missing)})"
    return f"{where} with data that no rank provided (a buffer that started with nothing usable)"


def numeric_check(schedule: Schedule, seed: int = 0, width: int = 2, rtol: float = 1e-9) -> ValidationReport:
    """Execute the schedule on random float64 data and compare every buffer with its goal.

    Applies the same step semantics with real numbers (reads at the start of a step, reduces
    add, copies overwrite; a buffer that starts with nothing usable holds NaN); static problems
    (bad paths, ranks) are reported as by `validate`.
    """
    s = schedule
    problem = _static_problem(s)
    if problem is not None:
        return problem
    n, kind = s.num_ranks, s.kind
    lay = _layout(s)
    ids = lay.chunk_ids
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((n, lay.chunks, width))
    start, goal = kind.start(ids), kind.goal(ids)
    unusable = start == NOTHING
    buf = (np.where(unusable[..., None], np.nan, data) if unusable.any() else data.copy()).reshape(-1, width)
    for rows in lay.step_rows:
        payload = buf[lay.src_buf[rows]]
        is_copy = s.op[rows] == COPY
        np.add.at(buf, lay.dst_buf[rows][~is_copy], payload[~is_copy])
        buf[lay.dst_buf[rows][is_copy]] = payload[is_copy]
    out = buf.reshape(n, lay.chunks, width)
    every = goal == EVERYONE
    close = np.ones(goal.shape, dtype=bool)  # NaN compares false: unusable data is never close
    if every.any():
        near = np.abs(out - data.sum(axis=0)) <= rtol * (np.abs(data).sum(axis=0) + 1e-300) * n
        close[every] = near.all(axis=2)[every]
    r, c = np.nonzero(goal >= 0)
    g = goal[r, c]
    close[r, c] = (np.abs(out[r, c] - data[g, c]) <= rtol * (np.abs(data[g, c]) + 1e-300) * n).all(axis=1)
    wrong = (goal != NOTHING) & ~close
    found = lay.first_short(wrong.ravel(), kind)
    if found is not None:
        r, ch = found
        return _fail(s, "wrong-sum", None, f"at the end rank {s.ranks[r]} holds a wrong sum in chunk {ch}")
    return ValidationReport(
        True,
        f"numeric check passed: {n} ranks x {s.num_chunks} chunks match the true {kind.title} result",
        None,
        None,
        len(s),
        len(lay.step_rows),
    )


__all__ = ["OPS", "InvalidScheduleError", "ValidationReport", "numeric_check", "validate"]
