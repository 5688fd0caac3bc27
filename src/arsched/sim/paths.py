"""Schedules compiled for simulation: per-transfer link lists, path latency and bottleneck.

Paths are compiled once per distinct path of the schedule (a ring over 1,024 ranks has two
million transfers but about a thousand paths) and expanded to transfers only where asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from arsched.collective.schedule import Schedule
from arsched.csr import gather
from arsched.errors import ArschedError


@dataclass(frozen=True)
class CompiledPaths:
    """Path p of the schedule's path table crosses links `path_links[path_ptr[p]:path_ptr[p+1]]`,
    in `path_latency[p]` seconds with the smallest bandwidth `path_bottleneck[p]` (bytes/s);
    transfer t takes path `path_id[t]`. The per-transfer views (`ptr`, `links`, `owner`,
    `latency`, `bottleneck`) are expanded on first use: the flow model never needs them, and
    on a 4,096-rank ring they would hold 200 million entries."""

    path_id: np.ndarray
    path_ptr: np.ndarray
    path_links: np.ndarray
    path_latency: np.ndarray
    path_bottleneck: np.ndarray

    @cached_property
    def path_owner(self) -> np.ndarray:
        """The path of every entry of `path_links`."""
        return np.repeat(np.arange(len(self.path_ptr) - 1), np.diff(self.path_ptr))

    @cached_property
    def ptr(self) -> np.ndarray:
        """Transfer t uses links `links[ptr[t]:ptr[t+1]]`."""
        return np.concatenate([[0], np.cumsum(np.diff(self.path_ptr)[self.path_id])]).astype(np.int64)

    @cached_property
    def links(self) -> np.ndarray:
        """The links of every transfer, one after another."""
        return self.path_links[gather(self.path_ptr, self.path_id)[0]]

    @cached_property
    def owner(self) -> np.ndarray:
        """The transfer of every entry of `links`."""
        return np.repeat(np.arange(len(self.path_id)), np.diff(self.path_ptr)[self.path_id])

    @cached_property
    def latency(self) -> np.ndarray:
        """Every transfer's path latency (s)."""
        return self.path_latency[self.path_id]

    @cached_property
    def bottleneck(self) -> np.ndarray:
        """Every transfer's path bottleneck (bytes/s)."""
        return self.path_bottleneck[self.path_id]


def compile_paths(schedule: Schedule) -> CompiledPaths:
    """Link indices, latency and bottleneck of every path of the schedule's path table."""
    c = schedule.topology.compiled
    lengths, flat = c.paths_links(schedule.paths)
    ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    owner = np.repeat(np.arange(len(lengths)), lengths)
    bad = np.union1d(np.flatnonzero(lengths == 0), owner[flat < 0])
    if len(bad):
        p = schedule.paths[int(bad[0])]
        raise ArschedError(
            f"path {' -> '.join(p)} is not a path over links of {schedule.topology.name}; "
            "validate the schedule first"
        )
    starts = ptr[:-1]
    path_lat = np.add.reduceat(c.latency[flat], starts) if len(flat) else np.zeros(0)
    for p in np.flatnonzero(lengths >= 8):  # summed as np.sum sums (pairwise from 8 terms on)
        path_lat[p] = c.latency[flat[ptr[p] : ptr[p + 1]]].sum()
    path_bn = np.minimum.reduceat(c.capacity[flat], starts) if len(flat) else np.zeros(0)
    return CompiledPaths(schedule.path_id.astype(np.int64), ptr, flat, path_lat, path_bn)


def step_groups(schedule: Schedule) -> tuple[np.ndarray, list[np.ndarray]]:
    """Dense step numbers 0..S−1 of every transfer, and the transfers of each step (stored
    order within a step)."""
    _, step = np.unique(schedule.step, return_inverse=True)
    step = step.ravel()
    order = np.argsort(step, kind="stable")
    return step, np.split(order, np.flatnonzero(np.diff(step[order])) + 1) if len(order) else []
