"""What each rank of `arsched run` holds before a run and checks after it, per collective, and
the torch.distributed call whose result it is checked against.

A rank's memory is the schedule's chunk space, one slot per chunk id (the IR's buffer model), so
an AllToAll rank holds n times its buffer. Slots that start with the rank's data get random
integers; slots that start with nothing usable (`kinds.NOTHING`) get `GARBAGE`, a value no
correct schedule can leave where a goal is checked. The reference runs on the same processes:

| collective | torch's input | torch's call | compared with the slots the goal names |
|---|---|---|---|
| allreduce | the whole chunk space | `all_reduce` | all |
| reduce_scatter | the whole chunk space | `reduce_scatter_single` | the rank's shard |
| allgather | the rank's shard | `all_gather_single` | all |
| broadcast | the whole chunk space | `broadcast(src=root)` | all |
| reduce | the whole chunk space | `reduce(dst=root)` | all, at the root only |
| alltoall | the rank's blocks | `all_to_all_single` (equal splits) | the blocks sent to the rank |

`reduce_scatter_single` and `all_gather_single` are torch 2.13's names for
`reduce_scatter_tensor` and `all_gather_into_tensor` (the old names warn); gloo runs all six on
CPU. In every row the goal's slots, in chunk order, are laid out as torch's output is, which is
why the same comparison serves all six.

Chunks are equal except for AllReduce, Broadcast and Reduce, whose references work element by
element and so let the vector split as evenly as integers allow (`np.linspace`), as AllReduce
runs always have; the others' shards and blocks must be equal for torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from arsched.collective.kinds import NOTHING, Collective

GARBAGE = 1_000_003.0  # an exact float32 far from any sum of the inputs (integers in -8..8)
TORCH_CALLS = {
    "allreduce": "all_reduce",
    "reduce_scatter": "reduce_scatter_single",
    "allgather": "all_gather_single",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "alltoall": "all_to_all_single",
}
IN_PLACE = ("allreduce", "broadcast", "reduce")  # torch's result overwrites its input
UNEVEN = IN_PLACE  # elementwise references: chunks may differ by one element


@dataclass(frozen=True)
class Shape:
    """The sizes of one run, in float32 elements, alike on every rank: the chunk space, its
    largest chunk, torch's input, torch's output where it is a tensor of its own (0 when in
    place) and one rank's buffer as the schedule format defines it."""

    total: int
    chunk: int
    inputs: int
    outputs: int
    buffer: int


def shape(kind: Collective, nelem: int) -> Shape:
    """The sizes for a buffer of `nelem` float32 values (at least one per chunk), from
    arithmetic alone, so that a run too large for memory is refused before anything is built."""
    nelem = max(nelem, kind.per_buffer)
    if kind.name in UNEVEN:
        total, chunk = nelem, -(-nelem // kind.num_chunks)
    else:
        chunk = nelem // kind.per_buffer
        total = chunk * kind.num_chunks
    part = total // kind.n  # a shard (ReduceScatter, AllGather) or one buffer (AllToAll)
    inputs = part if kind.name in ("allgather", "alltoall") else total
    outputs = {"reduce_scatter": part, "allgather": total, "alltoall": part}.get(kind.name, 0)
    return Shape(total, chunk, inputs, outputs, part if kind.name == "alltoall" else total)


@dataclass(frozen=True)
class Layout:
    """One rank's side of one run: `bounds[c]:bounds[c + 1]` are chunk c's elements; the element
    ranges `own` start with its data, `inputs` (in order) are torch's input and `goal` (in order)
    is compared with torch's output, a tensor of `outputs` elements (0: torch works in place)."""

    collective: str
    root: int | None
    bounds: list[int]
    own: list[tuple[int, int]]
    inputs: list[tuple[int, int]]
    goal: list[tuple[int, int]]
    outputs: int

    @property
    def total(self) -> int:
        """Elements of the chunk space."""
        return self.bounds[-1]


def layouts(kind: Collective, size: Shape) -> list[Layout]:
    """Each rank's layout for a run of these sizes."""
    if kind.name in UNEVEN:
        bounds = np.linspace(0, size.total, kind.num_chunks + 1).round().astype(np.int64)
    else:
        bounds = np.arange(kind.num_chunks + 1, dtype=np.int64) * size.chunk
    chunks = np.arange(kind.num_chunks)
    start, goal = kind.start(chunks), kind.goal(chunks)
    out = []
    for r in range(kind.n):
        own = _ranges(bounds, start[r] == r)
        inputs = own if kind.name in ("allgather", "alltoall") else [(0, size.total)]
        goal_r = _ranges(bounds, goal[r] != NOTHING)
        out.append(Layout(kind.name, kind.root, bounds.tolist(), own, inputs, goal_r, size.outputs))
    return out


def _ranges(bounds: np.ndarray, mask: np.ndarray) -> list[tuple[int, int]]:
    """Element ranges of the runs of consecutive chunks where `mask` holds, in order."""
    ids = np.flatnonzero(mask)
    if not len(ids):
        return []
    cut = np.flatnonzero(np.diff(ids) != 1) + 1
    firsts, lasts = ids[np.r_[0, cut]], ids[np.r_[cut - 1, len(ids) - 1]]
    return [(int(bounds[a]), int(bounds[b + 1])) for a, b in zip(firsts, lasts, strict=True)]


def torch_reference(layout: Layout, x: Any, out: Any) -> None:
    """Run torch's own collective on input `x` (output `out`, which is `x` when in place)."""
    import torch.distributed as dist

    call = getattr(dist, TORCH_CALLS[layout.collective])
    if layout.collective == "broadcast":
        call(x, src=layout.root)
    elif layout.collective == "reduce":
        call(x, dst=layout.root)
    elif layout.collective == "allreduce":
        call(x)
    else:
        call(out, x)
