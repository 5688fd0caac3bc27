"""The cluster fabric around GPU boxes: a NIC per rail, leaves (or ToRs) and spines.

Every box has `rails` NICs; GPU g uses NIC g // (gpus / rails) over its own PCIe link (with one
NIC per GPU, its own). Boxes are grouped into scalable units of `su` boxes. Each NIC has
`planes` ports of nic/planes bytes/s, port p in plane p:

- **rail** (rail-optimised, NVIDIA DGX SuperPOD reference architecture; Alibaba HPN's tier 1):
  every scalable unit has `leaves` leaf switches per plane, and NIC r of every box of the unit
  is cabled to leaf r mod leaves. With leaves = rails (the default) that is one leaf per rail:
  GPU i of every box shares leaf i, and traffic between rails crosses the NVSwitch first (as
  NCCL's PXN does). leaves=2 with spines=0 and 2 boxes is ForestColl's two-box A100 topology
  (NICs of even and odd rails on two InfiniBand switches).
- **clos** (a ToR per rack, Meta's RoCE training clusters, Gangidi et al., SIGCOMM 2024: the
  rack's GPUs on a rack switch, cluster switches above): every NIC of the `su` boxes of a rack
  on the rack's ToR, one ToR per plane. planes=2 is the dual-ToR, dual-plane design of Alibaba
  HPN (Qian et al., SIGCOMM 2024): every NIC has two ports, one to each ToR, and each plane has
  its own spines. How many boxes share a rack is our assumption (default 2).

Every leaf of a plane is cabled to every spine of that plane (`spines` per plane); the cables
of one leaf carry its downlink capacity (the NIC ports of a full unit) divided by `oversub`,
split evenly over the spines (parallel cables merged into one link). spines=0 is a rail-only
network (Wang et al., "Rail-only", 2023): leaves of different rails meet only through the
boxes' NVSwitches, and all boxes must be in one unit.

Levels for latency: 0 inside the box, 1 GPU-NIC (PCIe), 2 NIC-leaf, 3 leaf-spine.
"""

from __future__ import annotations

from dataclasses import dataclass

from arsched.limits import product
from arsched.topology.core import Topology
from arsched.topology.gpubox import Box

RAIL = "rail"
CLOS = "clos"
FABRICS = (RAIL, CLOS)


@dataclass(frozen=True)
class Fabric:
    """The network around the boxes (bandwidths per direction in bytes/s)."""

    kind: str  # RAIL or CLOS
    rails: int  # NICs per box
    pcie: float  # GPU to NIC
    nic: float  # per NIC, split evenly over its planes
    su: int  # boxes per scalable unit (rail) or rack (clos)
    leaves: int  # leaf switches (ToRs) per unit and plane
    spines: int  # per plane
    oversub: float  # a leaf's downlink over its uplink capacity
    planes: int

    def units(self, boxes: int) -> int:
        return -(-boxes // self.su)

    def leaf(self, unit: int, index: int, plane: int) -> str:
        stem = f"leaf{unit}_{index}" if self.kind == RAIL else f"tor{unit}"
        return stem + (f"p{plane}" if self.planes > 1 else "")

    def spine(self, index: int, plane: int) -> str:
        return f"spine{index}" + (f"p{plane}" if self.planes > 1 else "")


def sizes(box: Box, boxes: int, fabric: Fabric) -> tuple[int, int, int]:
    """(servers, switches, directed links) of the cluster, from closed forms, saturated at
    `limits.HUGE`: what `check_topology` needs before anything is built."""
    servers = product((boxes, box.gpus))
    switches = boxes if box.switch is not None else 0
    cables = product((boxes, box.cables()))
    if boxes > 1:
        units = fabric.units(boxes)
        leaves = product((units, fabric.planes, fabric.leaves))
        switches += product((boxes, fabric.rails)) + leaves + product((fabric.planes, fabric.spines))
        cables += servers + product((boxes, fabric.rails, fabric.planes)) + product((leaves, fabric.spines))
    return servers, switches, product((2, cables))


def build_cluster(name: str, box: Box, boxes: int, fabric: Fabric, latency: list[float]) -> Topology:
    """`boxes` copies of `box` joined by `fabric`; GPU g of box b is server `s{b*gpus+g}`, box b's
    NVSwitch `nvs{b}`, its NIC r `nic{b}_{r}`. One box has no fabric: nothing to join."""
    lat_box, lat_pcie, lat_nic, lat_spine = latency
    gpus = box.gpus
    servers = [f"s{i}" for i in range(boxes * gpus)]
    switches: list[str] = []
    cables: list[tuple[str, str, float, float]] = []
    for b in range(boxes):
        mine = servers[b * gpus : (b + 1) * gpus]
        if box.switch is not None:
            switches.append(f"nvs{b}")
            cables += [(gpu, f"nvs{b}", box.switch, lat_box) for gpu in mine]
        cables += [(mine[i], mine[j], bw, lat_box) for i, j, bw in box.mesh]
    if boxes > 1:
        _network(fabric, boxes, servers, gpus, switches, cables, (lat_pcie, lat_nic, lat_spine))
    return Topology.from_cables(name, servers, switches, cables, _rail_major(boxes, gpus, fabric.rails))


def _rail_major(boxes: int, gpus: int, rails: int) -> list[str]:
    """The GPUs rail by rail, box by box within a rail: the order in which the fabric's tree
    holds them (a rail leaf gathers one NIC of every box of its unit), for d-mod-k spreading
    (`Topology.spread_order`): by construction order, every rail's GPUs would share their index
    mod 8, and a leaf would send a rail's traffic to other units over one spine."""
    share = gpus // rails
    return [
        f"s{b * gpus + g}"
        for r in range(rails)
        for b in range(boxes)
        for g in range(r * share, (r + 1) * share)
    ]


def _network(
    fabric: Fabric,
    boxes: int,
    servers: list[str],
    gpus: int,
    switches: list[str],
    cables: list[tuple[str, str, float, float]],
    latency: tuple[float, float, float],
) -> None:
    """Add the NICs, leaves and spines of `fabric` and their cables to `switches` and `cables`."""
    lat_pcie, lat_nic, lat_spine = latency
    share = gpus // fabric.rails
    port = fabric.nic / fabric.planes
    for b in range(boxes):
        unit = b // fabric.su
        for r in range(fabric.rails):
            nic = f"nic{b}_{r}"
            switches.append(nic)
            cables += [
                (servers[b * gpus + g], nic, fabric.pcie, lat_pcie) for g in range(r * share, (r + 1) * share)
            ]
            index = r % fabric.leaves
            cables += [(nic, fabric.leaf(unit, index, p), port, lat_nic) for p in range(fabric.planes)]
    full = min(fabric.su, boxes)  # uplinks are sized for a full unit, the last one included
    ports = [len(range(index, fabric.rails, fabric.leaves)) for index in range(fabric.leaves)]
    spines = [[fabric.spine(j, p) for j in range(fabric.spines)] for p in range(fabric.planes)]
    for unit in range(fabric.units(boxes)):
        for p in range(fabric.planes):
            for index in range(fabric.leaves):
                leaf = fabric.leaf(unit, index, p)
                switches.append(leaf)
                if fabric.spines:
                    up = full * ports[index] * port / (fabric.oversub * fabric.spines)
                    cables += [(leaf, spine, up, lat_spine) for spine in spines[p]]
    switches += [s for plane in spines for s in plane]
