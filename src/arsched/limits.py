"""How much memory an input may ask for, checked before the work starts.

Sizes that come from input (a topology spec's parameters, a chunk count, a cluster's GPUs per
server) are turned into an estimate of the memory the work will take, from closed forms and
measured costs per item, and compared with one limit: half the machine's physical memory by
default, or the size that `ARSCHED_MAX_MEMORY` (e.g. '32GB') or the command line's
`--max-memory` sets. An input over the limit is refused at once, in one sentence naming the
input, the estimate and the limit, instead of growing until the system kills the process.

The costs per item are peaks of resident memory measured while building (and, for schedules,
validating), rounded up: a directed link of a topology took 330–400 bytes with its share of the
nodes and compiled arrays, a transfer 100–410 bytes (the fewer ranks, the more), a byte of a
cluster trace 7–26 bytes.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable

from arsched.errors import ArschedError, TopologyError, UnitError
from arsched.units import parse_size

ENV = "ARSCHED_MAX_MEMORY"
"""The environment variable that holds the limit (a size such as '32GB'); `set_max_memory`
sets it, so that the processes this one starts (a sweep's workers) keep the same limit."""

FALLBACK = 8 * 2**30
"""The limit where the physical memory cannot be read."""

LINK_BYTES = 512
"""A directed link of a built topology: its Link object, index entries and compiled arrays."""

NODE_BYTES = 256
"""A node of a built topology: its id, kind and index entries."""

TRANSFER_BYTES = 128
"""A transfer of a schedule while it is built, stored and validated."""

BATCH_BYTES = 1280
"""The bookkeeping of one batch of transfers: builders add a step's transfers a batch at a
time, about one transfer per rank in a batch, so a transfer of an n-rank schedule costs
`TRANSFER_BYTES + BATCH_BYTES / n` (measured: 410 bytes at 4 ranks, 180 at 16, 120 at 64)."""

TRACE_BYTES = 32
"""A byte of a cluster trace file once read (its rows as Python strings and dicts, then the jobs'
columns); measured: 26 for Tiresias CSV, 14 for Helios CSV, 7 for Philly JSON."""

GPU_BYTES = 64
"""A GPU of a simulated cluster: its slot in the free-GPU tables and placements."""

HUGE = 10**30
"""Counts are computed up to here and no further: a spec such as 'bcube:n=2,k=1000000000'
must be refused without computing 2 to the billionth."""


class LimitError(ArschedError):
    """An input would need more memory than the limit allows (the message says how much)."""


class TopologyLimitError(LimitError, TopologyError):
    """A topology's parameters ask for more nodes and links than fit in the memory limit."""


def default_max_memory() -> int:
    """Half the machine's physical memory: generous, but it leaves room for the rest of the
    system and stops a blow-up well before the machine starts to swap or kill processes."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return FALLBACK
    return total // 2 if total > 0 else FALLBACK


def _parse_limit(value: str | float, where: str) -> int:
    try:
        nbytes = parse_size(value)
    except UnitError:
        nbytes = math.nan
    if not (math.isfinite(nbytes) and nbytes >= 1):
        raise LimitError(f"{where} must be a memory size such as 16GB or 512MiB, got {value!r}")
    return int(nbytes)


def max_memory() -> int:
    """The limit in bytes: `ARSCHED_MAX_MEMORY` if set, else `default_max_memory()`."""
    raw = os.environ.get(ENV, "").strip()
    return _parse_limit(raw, ENV) if raw else default_max_memory()


def set_max_memory(value: str | float | None) -> None:
    """Set the limit for this process and the processes it starts (a size such as '16GB' or a
    number of bytes), through `ARSCHED_MAX_MEMORY`; None goes back to the default."""
    if value is None:
        os.environ.pop(ENV, None)
        return
    os.environ[ENV] = str(_parse_limit(value, "the memory limit (--max-memory)"))


def power(base: int, exp: int) -> int:
    """base ** exp for base >= 2 and exp >= 0 (numpy integers too), saturated at `HUGE` without
    computing more."""
    return HUGE if exp > 100 else min(int(base) ** int(exp), HUGE)


def product(factors: Iterable[int]) -> int:
    """The product of positive integers (numpy integers too), saturated at `HUGE`."""
    out = 1
    for f in factors:
        out = min(out * int(f), HUGE)
    return out


def format_count(count: int) -> str:
    """A count for people: '1,500,000' below a trillion, '2.5e+15' above, 'more than 1e+30'
    at `HUGE`."""
    if count >= HUGE:
        return f"more than {float(HUGE):.0e}"
    return f"{count:,}" if count < 10**12 else f"{float(count):.3g}"


def format_bytes(nbytes: float) -> str:
    """A size for people: '12.4 GB', '850 MB', '3.1 TB' (decimal units, three digits)."""
    if nbytes >= HUGE:
        return f"more than {float(HUGE):.0e} bytes"
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} B"


def check_memory(subject: str, need: float, error: type[LimitError] = LimitError) -> None:
    """Refuse, with `error`, work that would need `need` bytes when that is over the limit;
    `subject` says what would be built and how big, e.g. 'fattree(1000) would have
    250,000,000 servers, 1,250,000 switches and 1,500,000,000 links'."""
    limit = max_memory()
    if need > limit:
        raise error(
            f"{subject}, needing about {format_bytes(need)} of memory: too many for the limit of "
            f"{format_bytes(limit)} (raise it with --max-memory or {ENV} if the machine has room)"
        )


def topology_memory(nodes: int, links: int) -> int:
    """Bytes a topology of `nodes` nodes and `links` directed links takes once built."""
    return nodes * NODE_BYTES + links * LINK_BYTES


def check_topology(name: str, servers: int, switches: int, links: int) -> None:
    """Refuse a topology whose node and directed-link counts (from the family's closed forms,
    before anything is built) would not fit in the memory limit."""
    parts = [f"{format_count(servers)} servers"]
    parts += [f"{format_count(switches)} switch{'es' if switches > 1 else ''}"] if switches else []
    need = topology_memory(servers + switches, links)
    subject = f"{name} would have {', '.join(parts)} and {format_count(links)} links"
    check_memory(subject, need, TopologyLimitError)


def min_transfers(ranks: int, chunks: int) -> int:
    """The fewest transfers of any AllReduce of `chunks` chunks over `ranks` ranks: every chunk
    needs 2(ranks − 1) (one-way gossip: ranks − 1 to gather everyone's data somewhere, as many
    to spread the sum)."""
    return 2 * max(ranks - 1, 0) * chunks


VALIDATOR_BLOCK_BYTES = 256 * 2**20
"""The most symbolic state the validator holds at once: it checks chunks block by block, each
buffer's record of whose data it holds being one bit per rank."""


PATH_BYTES = 2048
"""A distinct path of a schedule while it is built and validated: its node ids, the builder's
index entry and its compiled links (measured: 1,430 bytes at 512 ranks, 1,720 at 1,024, where
every rank pair of a sharded PS has its own)."""


def schedule_memory(ranks: int, chunks: int, transfers: int, paths: int | None = None) -> int:
    """Bytes a schedule takes while it is built and validated: its transfers, its distinct
    `paths`, and the validator's record of whose data every buffer holds (one bit per rank, per
    rank and chunk, a block of chunks at a time: `VALIDATOR_BLOCK_BYTES`). Where the builder
    does not say how many paths it makes, every buffer's record is counted instead of a block:
    it stands for the paths of every rank pair (a sharded PS over 4,096 ranks peaked above
    24 GB, measured)."""
    per_transfer = TRANSFER_BYTES + BATCH_BYTES // max(ranks, 1)
    records = ranks * chunks * math.ceil(ranks / 64) * 8
    if paths is None:
        return transfers * per_transfer + records
    return transfers * per_transfer + paths * PATH_BYTES + min(records, VALIDATOR_BLOCK_BYTES)


EVENT_BYTES = 256
"""A transfer in the flow model's event simulation: its dependencies, heap entries, times and
the compiled paths' per-transfer views (measured: halving-doubling over 4,096 ranks, 33.5
million transfers, peaked at 11.0 GB with its schedule held, about 330 bytes per transfer in
all)."""


def check_simulation(transfers: int) -> None:
    """Refuse an event simulation of `transfers` transfers that would not fit in the memory
    limit."""
    check_memory(f"the event simulation of {format_count(transfers)} transfers", transfers * EVENT_BYTES)


def check_schedule(
    name: str, ranks: int, chunks: int, transfers: int | None = None, paths: int | None = None
) -> None:
    """Refuse a schedule of `chunks` chunks over `ranks` ranks that would not fit in the memory
    limit; `transfers` and `paths` are the algorithm's counts where it knows them (else
    `min_transfers`, and see `schedule_memory`)."""
    count = min_transfers(ranks, chunks) if transfers is None else transfers
    check_memory(
        f"{name} over {format_count(ranks)} ranks with {format_count(chunks)} chunks would have "
        f"{'at least ' if transfers is None else ''}{format_count(count)} transfers",
        schedule_memory(ranks, chunks, count, paths),
    )


def check_file(what: str, path: object, size: int, per_byte: int) -> None:
    """Refuse, before reading it, a file of `size` bytes that takes `per_byte` bytes of memory
    per byte once read, when that is over the limit (`what` says what the file is)."""
    check_memory(f"{what} {path} holds {format_bytes(size)} to read", size * per_byte)


def check_cluster(name: str, servers: int, gpus_per_server: int) -> None:
    """Refuse a simulated cluster of `servers` servers with `gpus_per_server` GPUs each that
    would not fit in the memory limit."""
    need = servers * gpus_per_server * GPU_BYTES
    subject = (
        f"{name} would have {format_count(servers)} servers with {format_count(gpus_per_server)} GPUs each"
    )
    check_memory(subject, need)


__all__ = [
    "ENV",
    "LimitError",
    "TopologyLimitError",
    "check_cluster",
    "check_file",
    "check_memory",
    "check_schedule",
    "check_simulation",
    "check_topology",
    "default_max_memory",
    "format_bytes",
    "format_count",
    "max_memory",
    "min_transfers",
    "power",
    "product",
    "schedule_memory",
    "set_max_memory",
    "topology_memory",
]
