"""The memory limit: every size taken from input is checked before the work starts. Absurd
inputs are refused in well under a second with one sentence naming the input, the estimate and
the limit; huge but legitimate ones (thousands of ranks) pass the check.

The limit is pinned per test (`ARSCHED_MAX_MEMORY`) so that the outcome does not depend on the
machine running the tests; the default (half the physical memory) is checked on its own.
"""

from __future__ import annotations

import os
import re
import time

import numpy as np
import pytest

from arsched import limits
from arsched.algorithms import build
from arsched.errors import TopologyError
from arsched.limits import (
    ENV,
    LimitError,
    check_schedule,
    format_bytes,
    max_memory,
    schedule_memory,
    set_max_memory,
)
from arsched.topology import bcube, dcell, fattree, jellyfish, star, torus
from clihelp import assert_one_line_error, run

BIG_MACHINE = "64GB"  # the limit of a 128 GB machine


@pytest.fixture(autouse=True)
def pinned_limit(monkeypatch):
    """Every test starts with the limit of a 128 GB machine; the environment is restored after
    it, even where the command line's --max-memory changed it."""
    monkeypatch.setenv(ENV, BIG_MACHINE)


def refused_fast(capsys, *argv: str) -> str:
    """Run the CLI; it must refuse with one line before doing the work (the inputs here ran for
    minutes or died out of memory before the checks; 10 s leaves room for a loaded machine,
    where building an 8,192-host fat-tree alone takes a second). The line, for checks."""
    t0 = time.perf_counter()
    code, _, err = run(capsys, *argv)
    assert time.perf_counter() - t0 < 10.0, err
    assert_one_line_error(code, err)
    return err


ABSURD_SPECS = [
    ("bcube:n=1000,k=5", "1e+18 servers"),
    ("bcube:n=2,k=1000000000", "more than 1e+30 servers"),  # counts saturate, nothing explodes
    ("fattree:k=1000", "250,000,000 servers, 1,250,000 switches and 1,500,000,000 links"),
    ("torus:dims=100000x100000", "10,000,000,000 servers"),
    ("jellyfish:switches=10000000,ports=64,net_ports=32", "320,000,000 servers, 10,000,000 switches"),
    ("dcell:n=8,k=3", "27,630,792 servers"),
    ("dcell:n=2,k=1000000000", "more than 1e+30 servers"),
    ("ring:n=100000000000", "100,000,000,000 servers"),
    ("star:n=10000000000", "10,000,000,000 servers, 1 switch and"),
    ("leafspine:leaves=100000,spines=100000,servers_per_leaf=4", "20,000,800,000 links"),
]


@pytest.mark.parametrize(("spec", "counts"), ABSURD_SPECS)
def test_absurd_topology_specs_are_refused_at_once(capsys, spec, counts):
    err = refused_fast(capsys, "topology", spec)
    family = spec.partition(":")[0]
    assert err.startswith(f"error: {family}(") and counts in err, err
    assert re.search(r"needing about ([0-9.e+]+ [kMGTP]?B|more than 1e\+30 bytes) of memory", err), err
    assert "limit of 64 GB" in err and "--max-memory" in err and ENV in err, err


def test_a_huge_spec_inside_a_schedule_command_writes_nothing(capsys, tmp_path):
    target = tmp_path / "s.json"
    refused_fast(capsys, "schedule", "-t", "fattree:k=1000", "-a", "ring", "-o", str(target))
    assert list(tmp_path.iterdir()) == []


def test_ten_million_chunks_on_four_ranks_are_refused(capsys, tmp_path):
    target = tmp_path / "s.json"

    def argv(chunks: str) -> tuple[str, ...]:
        return ("schedule", "-t", "ring:n=4", "-a", "ring", "--chunks", chunks, "-o", str(target))

    err = refused_fast(capsys, *argv("10000000000"))  # even a big machine's limit
    assert "60,000,000,000 transfers" in err and "limit of 64 GB" in err
    err = refused_fast(capsys, "--max-memory", "16GB", *argv("10000000"))  # 26.9 GB
    assert "ring over 4 ranks with 10,000,000 chunks would have at least 60,000,000 transfers" in err
    assert "limit of 16 GB" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("algorithm", ["ps", "sharded-ps", "multi-ring", "dbtree", "rhd"])
def test_every_chunked_baseline_checks_its_chunks(capsys, tmp_path, algorithm):
    argv = ("schedule", "-t", "ring:n=4", "-a", algorithm, "--chunks", "40000000000")
    err = refused_fast(capsys, *argv, "-o", str(tmp_path / "s.json"))
    assert f"error: {algorithm} over 4 ranks with 40,000,000,000 chunks" in err


def test_a_ring_over_8192_fat_tree_hosts_is_refused_before_it_starts(capsys, tmp_path, monkeypatch):
    # it used to run 79 s and die allocating 64 GiB: the validator's bitsets (a bit per rank,
    # for every rank and chunk: 8192³ bits) on top of 134 million transfers. The validator now
    # holds a block of them at a time, and 134 million transfers alone need 17 GB: too many for
    # a 16 GB machine, not for a 128 GB one (see test_large_schedules_pass_the_schedule_check)
    monkeypatch.setenv(ENV, SMALL_MACHINE)
    err = refused_fast(capsys, "schedule", "-t", "fattree:k=32", "-a", "ring", "-o", str(tmp_path / "s.json"))
    assert "ring over 8,192 ranks with 8,192 chunks would have at least 134,201,344 transfers" in err
    assert f"needing about {format_bytes(schedule_memory(8192, 8192, 134_201_344, 8192))}" in err, err


def test_max_memory_option_sets_the_limit_over_the_environment(capsys, monkeypatch):
    err = refused_fast(capsys, "--max-memory", "100kB", "topology", "fattree:k=8")
    assert "fattree(8) would have 128 servers, 80 switches and 768 links" in err
    assert "needing about 446 kB of memory: too many for the limit of 100 kB" in err
    monkeypatch.setenv(ENV, "100kB")
    code, out, err = run(capsys, "--max-memory", "1MB", "topology", "fattree:k=8", "--json")
    assert (code, err) == (0, "") and '"servers": 128' in out


@pytest.mark.parametrize("value", ["abc", "0", "-5GB", "1e400"])
def test_a_bad_limit_is_one_sentence(capsys, monkeypatch, value):
    err = refused_fast(capsys, "--max-memory", value, "topology", "ring:n=4")
    assert f"--max-memory) must be a memory size such as 16GB or 512MiB, got {value!r}" in err
    monkeypatch.setenv(ENV, value)
    err = refused_fast(capsys, "topology", "ring:n=4")
    assert f"{ENV} must be a memory size such as 16GB or 512MiB, got {value!r}" in err


def test_the_default_is_half_the_physical_memory(monkeypatch):
    monkeypatch.delenv(ENV)
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert max_memory() == limits.default_max_memory() == physical // 2
    set_max_memory("3GB")
    assert os.environ[ENV] == "3000000000" and max_memory() == 3 * 10**9
    set_max_memory(None)
    assert ENV not in os.environ


def test_topology_limit_errors_are_topology_errors_too(monkeypatch):
    monkeypatch.setenv(ENV, "1MB")
    with pytest.raises(TopologyError, match=r"torus\(64x64\) would have 4,096 servers and 16,384 links"):
        torus((64, 64))
    with pytest.raises(LimitError):
        bcube(8, 3)


# ---- huge but legitimate inputs pass ----------------------------------------------------------
SMALL_MACHINE = "8GB"  # the limit of a 16 GB laptop


def test_thousands_of_hosts_pass_the_topology_check(monkeypatch):
    monkeypatch.setenv(ENV, SMALL_MACHINE)
    assert len(fattree(32).servers) == 8192  # the network itself is small: 49,152 links
    assert len(bcube(8, 3).servers) == 4096
    assert len(dcell(3, 2).servers) == 156
    assert len(jellyfish(1000, 16, 8).servers) == 8000


@pytest.mark.parametrize(
    ("what", "ranks", "chunks", "transfers", "paths", "limit"),
    [
        ("ring on a 1,024-host fat-tree", 1024, 1024, None, None, SMALL_MACHINE),
        ("ring on 2,048 ranks", 2048, 2048, None, None, SMALL_MACHINE),
        ("ring on the 847-host production Clos", 847, 847, None, None, SMALL_MACHINE),
        ("tree packing on DCell(3,2)", 156, 1691, 524_210, None, SMALL_MACHINE),
        ("ring on 4 ranks with a million chunks", 4, 1_000_000, None, None, SMALL_MACHINE),
        ("ring on 4,096 ranks, one path each", 4096, 4096, None, 4096, SMALL_MACHINE),
        ("halving-doubling on 4,096 ranks", 4096, 4096, None, 4096 * 14, SMALL_MACHINE),
        ("ring on 8,192 ranks, one path each", 8192, 8192, None, 8192, BIG_MACHINE),
    ],
)
def test_large_schedules_pass_the_schedule_check(monkeypatch, what, ranks, chunks, transfers, paths, limit):
    """Thousands of ranks pass where the builder says how few paths it makes (the validator
    holds a block of buffers' records at a time); without a path count every rank pair's is
    assumed."""
    monkeypatch.setenv(ENV, limit)
    check_schedule(what, ranks, chunks, transfers, paths)


def test_a_ring_checks_its_chunks_with_its_own_ranks(monkeypatch):
    monkeypatch.setenv(ENV, "1MB")  # 4 ranks × 1,000 chunks: 6,000 transfers, 2.7 MB
    with pytest.raises(LimitError, match="ring over 4 ranks with 1,000 chunks"):
        build("ring", torus((4,)), None, 1e6, chunks=1000)
    monkeypatch.setenv(ENV, "10MB")
    assert len(build("ring", torus((4,)), None, 1e6, chunks=1000)) == 6000


def test_compare_lists_an_algorithm_over_the_limit_with_the_reason():
    """One algorithm over the memory limit does not stop the others (`arsched compare`)."""
    from arsched.algorithms.evaluate import evaluate
    from arsched.topology import parse_spec

    row = evaluate(parse_spec("ring:n=4"), "ring", 1e6, params={"chunks": 10**12})
    assert row.transfers == 0 and "memory" in row.note and row.time_s != row.time_s  # nan


def test_a_cluster_of_too_many_gpus_is_refused_before_it_is_built(monkeypatch):
    from arsched.cluster import parse_cluster

    monkeypatch.setenv(ENV, "8GB")
    with pytest.raises(LimitError, match="65,536 servers with 4,096 GPUs each"):
        parse_cluster("fattree:k=64,gpus=4096")
    parse_cluster("fattree:k=64,gpus=8")  # the same network with real servers fits


def test_an_event_simulation_over_the_limit_is_refused_in_one_sentence(capsys, monkeypatch, tmp_path):
    """The event simulation takes hundreds of bytes per transfer (halving-doubling over 4,096
    ranks peaked at 11 GB): one that would not fit is refused before it starts, from the API and
    the CLI; a schedule the contention-free sweep times exactly needs no such memory."""
    from arsched.collective import save
    from arsched.limits import EVENT_BYTES
    from arsched.sim import simulate_flow, simulate_jobs
    from schedules import ring_allreduce

    topo = bcube(4, 1)
    crossing = ring_allreduce(topo, list(np.random.default_rng(2).permutation(topo.servers)), 1e7, 16)
    assert simulate_flow(crossing).notes["method"] == "events"
    monkeypatch.setenv(ENV, str(len(crossing) * EVENT_BYTES - 1))
    with pytest.raises(LimitError, match=f"the event simulation of {len(crossing):,} transfers"):
        simulate_flow(crossing)
    monkeypatch.setenv(ENV, str(2 * len(crossing) * EVENT_BYTES - 1))  # each job alone fits, not both
    with pytest.raises(LimitError, match=f"the event simulation of {2 * len(crossing):,} transfers"):
        simulate_jobs([crossing, crossing])
    monkeypatch.setenv(ENV, str(len(crossing) * EVENT_BYTES - 1))
    path = tmp_path / "s.json"
    save(crossing, path)
    assert_one_line_error(*run(capsys, "simulate", str(path))[::2])
    plain = build("ring", star(4), None, 1e6)
    assert simulate_flow(plain).notes["method"] == "sweep"
