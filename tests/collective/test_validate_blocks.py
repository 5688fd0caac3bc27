"""The validator checks chunks block by block (`validate.BLOCK_BYTES`): with one chunk per block
it gives the same report, word for word, as with every chunk at once — on valid schedules,
mutated ones (a dropped transfer, a duplicated reduce, a transfer moved to another chunk) and
random transfer lists of every collective, including the first violation when several blocks
fail at different steps."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st
from test_kinds import random_cases
from test_validate import cases, mutate

from arsched.collective import Schedule, Transfer, validate
from schedules import make, topo

validate_module = importlib.import_module("arsched.collective.validate")  # the package exports the function


@contextlib.contextmanager
def one_chunk_per_block() -> Iterator[None]:
    saved = validate_module.BLOCK_BYTES
    validate_module.BLOCK_BYTES = 1
    try:
        yield
    finally:
        validate_module.BLOCK_BYTES = saved


def same_report(s: Schedule) -> None:
    whole = validate(s)
    with one_chunk_per_block():
        blocks = validate(s)
    assert (blocks.ok, blocks.kind, blocks.transfer, blocks.message) == (
        whole.ok,
        whole.kind,
        whole.transfer,
        whole.message,
    )


@settings(max_examples=150, deadline=None)
@given(cases(), st.sampled_from(["none", "drop", "duplicate-reduce", "change-chunk"]), st.integers(0, 10_000))
def test_blocks_report_as_one_block_on_allreduce_mutations(case, kind, i):
    t, ranks, transfers, num_chunks = case
    if kind != "none" and not (kind == "change-chunk" and num_chunks < 2):
        transfers, _ = mutate(transfers, num_chunks, kind, i, i)
    same_report(make(t, ranks, transfers, num_chunks))


@settings(max_examples=300, deadline=None)
@given(random_cases())
def test_blocks_report_as_one_block_on_random_collectives(s):
    same_report(s)


def test_the_earliest_step_wins_across_blocks():
    """Chunk 1 double counts in step 3, chunk 0 in step 1 but later in stored order."""
    t = topo("star:n=4")
    ranks = ("s0", "s1", "s2")
    rows = [
        Transfer(3, 1, "s0", "s1", "reduce"),
        Transfer(3, 1, "s0", "s1", "reduce"),
        Transfer(1, 0, "s2", "s1", "reduce"),
        Transfer(1, 0, "s2", "s1", "reduce"),
    ]
    s = make(t, ranks, rows, 3)
    same_report(s)
    assert validate(s).transfer == 3
