"""Schedules compiled for simulation: per-transfer link lists, path latency and bottleneck.

Paths are compiled once per distinct path of the schedule (a ring over 1,024 ranks has two
million transfers but about a thousand paths) and expanded to transfers with numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from arsched.collective.schedule import Schedule
from arsched.errors import ArschedError


@dataclass(frozen=True)
class CompiledPaths:
    """Transfer t uses links `links[ptr[t]:ptr[t+1]]`; `latency[t]` is its path latency (s)
    and `bottleneck[t]` the smallest link bandwidth on its path (bytes/s)."""

    ptr: np.ndarray
    links: np.ndarray
    owner: np.ndarray  # transfer index of every entry of `links`
    latency: np.ndarray
    bottleneck: np.ndarray


def compile_paths(schedule: Schedule) -> CompiledPaths:
    """Link indices, latency and bottleneck of every transfer's path."""
    c = schedule.topology.compiled
    per_path = [c.path_links(p) for p in schedule.paths]
    for p, links in zip(schedule.paths, per_path, strict=True):
        if len(links) == 0 or (links < 0).any():
            raise ArschedError(
                f"path {' -> '.join(p)} is not a path over links of {schedule.topology.name}; "
                "validate the schedule first"
            )
    lengths = np.array([len(x) for x in per_path], dtype=np.int64)
    flat = np.concatenate(per_path) if per_path else np.zeros(0, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]) if len(lengths) else lengths
    path_lat = np.array([c.latency[x].sum() for x in per_path]) if per_path else np.zeros(0)
    path_bn = np.array([c.capacity[x].min() for x in per_path]) if per_path else np.zeros(0)
    pid = schedule.path_id
    n_links = lengths[pid]
    ptr = np.concatenate([[0], np.cumsum(n_links)])
    owner = np.repeat(np.arange(len(pid)), n_links)
    offset = np.arange(ptr[-1]) - ptr[owner]
    links = flat[starts[pid][owner] + offset] if len(owner) else np.zeros(0, dtype=np.int64)
    return CompiledPaths(ptr, links, owner, path_lat[pid], path_bn[pid])


def step_groups(schedule: Schedule) -> tuple[np.ndarray, list[np.ndarray]]:
    """Dense step numbers 0..S−1 of every transfer, and the transfers of each step (stored
    order within a step)."""
    _, step = np.unique(schedule.step, return_inverse=True)
    step = step.ravel()
    order = np.argsort(step, kind="stable")
    return step, np.split(order, np.flatnonzero(np.diff(step[order])) + 1) if len(order) else []
