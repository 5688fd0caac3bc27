"""GPU clusters: `hgx` (NVIDIA 8-GPU NVSwitch boxes) and `mi250` (AMD xGMI-mesh boxes) on a
rail-optimised or ToR (Clos) fabric. The ranks are the GPUs (servers `s{i}`); NVSwitches,
NICs, leaves and spines are switch nodes. The numbers and their sources are in `gpubox.py`,
the fabric designs in `gpufabric.py`.

One family for NVIDIA boxes, named after the HGX baseboard that DGX and OEM servers share (a
DGX A100/H100 is an HGX box with one NIC per GPU, this family's default); `gen` picks the
published bandwidths, and `nvlink`, `pcie`, `nic` override them. The box size is
`gpus_per_box`, not `gpus`: in a cluster spec (`arsched cluster`) `gpus=` is the GPUs of each
server, and here every GPU is a server.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

from arsched.errors import TopologyError
from arsched.limits import check_topology
from arsched.topology.core import Topology, is_int, per_level
from arsched.topology.gpubox import GENERATIONS, LATENCY, XGMI_LATENCY, Box, mi250_box, nvswitch_box
from arsched.topology.gpufabric import CLOS, FABRICS, RAIL, Fabric, build_cluster, sizes

RACK_BOXES = 2
"""Boxes per rack (per ToR) in a clos fabric: our assumption."""

RAIL_SPINES = 2
"""Spines per plane where a plane has more than one leaf and none were asked for."""


def hgx(
    boxes: int,
    gen: str = "a100",
    fabric: str = RAIL,
    gpus_per_box: int = 8,
    rails: int | None = None,
    nvlink: float | None = None,
    pcie: float | None = None,
    nic: float | None = None,
    su: int | None = None,
    leaves: int | None = None,
    spines: int | None = None,
    oversub: float = 1.0,
    planes: int = 1,
    latency: float | Sequence[float] | None = None,
) -> Topology:
    """`boxes` NVIDIA HGX boxes of `gpus_per_box` GPUs on one NVSwitch each, `rails` NICs per box
    (default one per GPU), on a `fabric` ('rail' or 'clos').

    gen 'a100': NVLink 300 GB/s per GPU, PCIe Gen4 31.5 GB/s, HDR 200 Gb/s NICs, 20 boxes per
    scalable unit; 'h100': 450 GB/s, Gen5 63 GB/s, NDR 400 Gb/s, 32 boxes (all per direction).
    See `gpufabric` for su, leaves, spines, oversub, planes; `latency` per level (0 NVLink,
    1 PCIe, 2 NIC-leaf, 3 leaf-spine) defaults to `gpubox.LATENCY`. One box has no fabric.
    """
    family = "hgx"
    if gen not in ("a100", "h100"):
        raise TopologyError(f"hgx: gen must be a100 or h100, got gen={gen!r}")
    _count(family, "gpus_per_box", gpus_per_box, 2)
    spec = GENERATIONS[gen]
    box = nvswitch_box(int(gpus_per_box), _rate(family, "nvlink", nvlink, spec.intra))
    name = f"hgx-{gen}({boxes}x{gpus_per_box},{fabric}{_planes(planes)})"
    lat = latency if latency is not None else LATENCY
    return _cluster(
        family, name, box, boxes, fabric, rails, pcie, nic, su, leaves, spines, oversub, planes, lat, gen
    )


def mi250(
    boxes: int,
    fabric: str = RAIL,
    rails: int = 16,
    xgmi: float | None = None,
    pcie: float | None = None,
    nic: float | None = None,
    su: int | None = None,
    leaves: int | None = None,
    spines: int | None = None,
    oversub: float = 1.0,
    planes: int = 1,
    latency: float | Sequence[float] | None = None,
) -> Topology:
    """`boxes` AMD MI250 boxes: 16 GCDs each in their direct xGMI mesh (no switch; 50 GB/s per
    link, 4 links between the two GCDs of a module), `rails` NICs per box (default one per GCD,
    128 Gb/s, ForestColl's 16 GB/s per GCD), PCIe Gen4 31.5 GB/s, on a `fabric` as `hgx`.

    `latency` per level: 0 an xGMI link (0.6 µs), 1 PCIe, 2 NIC-leaf, 3 leaf-spine.
    """
    family = "mi250"
    box = mi250_box(_rate(family, "xgmi", xgmi, GENERATIONS["mi250"].intra))
    name = f"mi250({boxes}x{box.gpus},{fabric}{_planes(planes)})"
    lat = latency if latency is not None else (XGMI_LATENCY, *LATENCY[1:])
    return _cluster(
        family, name, box, boxes, fabric, rails, pcie, nic, su, leaves, spines, oversub, planes, lat, "mi250"
    )


def _cluster(
    family: str,
    name: str,
    box: Box,
    boxes: int,
    fabric: str,
    rails: int | None,
    pcie: float | None,
    nic: float | None,
    su: int | None,
    leaves: int | None,
    spines: int | None,
    oversub: float,
    planes: int,
    latency: float | Sequence[float],
    gen: str,
) -> Topology:
    """Check the fabric's parameters, refuse a cluster too big for the memory limit, build it."""
    _count(family, "boxes", boxes, 1)
    if fabric not in FABRICS:
        raise TopologyError(f"{family}: fabric must be {' or '.join(FABRICS)}, got fabric={fabric!r}")
    rails = box.gpus if rails is None else rails
    _count(family, "rails", rails, 1)
    if box.gpus % rails:
        raise TopologyError(
            f"{family}: rails={rails} NICs must divide the {box.gpus} GPUs of a box evenly "
            f"(GPUs share NICs in equal groups)"
        )
    spec = GENERATIONS[gen]
    su = (spec.su if fabric == RAIL else RACK_BOXES) if su is None else su
    _count(family, "su", su, 1)
    _count(family, "planes", planes, 1)
    if fabric == CLOS and leaves not in (None, 1):
        raise TopologyError(
            f"{family}: leaves={leaves!r} applies to fabric=rail; a clos rack has one ToR per plane "
            "(planes=2 for dual ToRs)"
        )
    leaves = (rails if fabric == RAIL else 1) if leaves is None else leaves
    if not (is_int(leaves) and 1 <= leaves <= rails):
        raise TopologyError(f"{family} needs 1 <= leaves <= rails={rails} per unit and plane, got {leaves!r}")
    units = -(-boxes // su)
    spines = (0 if units * leaves == 1 else RAIL_SPINES) if spines is None else spines
    _count(family, "spines", spines, 0)
    if spines == 0 and units > 1:
        raise TopologyError(
            f"{family}: spines=0 leaves the {units} units of su={su} boxes unconnected; "
            f"give spines >= 1 or su >= boxes={boxes}"
        )
    ratio = _real(oversub)
    if not ratio >= 1:
        raise TopologyError(
            f"{family}: oversub (a leaf's downlink over uplink capacity) must be a finite number >= 1 "
            f"such as 1, 2 or 3:1, got oversub={oversub!r}"
        )
    net = Fabric(
        kind=fabric,
        rails=int(rails),
        pcie=_rate(family, "pcie", pcie, spec.pcie),
        nic=_rate(family, "nic", nic, spec.nic),
        su=int(su),
        leaves=int(leaves),
        spines=int(spines),
        oversub=ratio,
        planes=int(planes),
    )
    check_topology(name, *sizes(box, int(boxes), net))
    lats = per_level(latency, 4, "latency", name)
    return build_cluster(name, box, int(boxes), net, lats)


def _count(family: str, label: str, value: object, low: int) -> None:
    if not (is_int(value) and value >= low):  # type: ignore[operator]
        raise TopologyError(f"{family} needs {label} >= {low}, got {label}={value!r}")


def _rate(family: str, label: str, value: float | None, default: float) -> float:
    """A bandwidth parameter in bytes/s: `default` where not given, else a finite number > 0."""
    if value is None:
        return default
    rate = _real(value)
    if not rate > 0:
        raise TopologyError(
            f"{family}: {label} must be a bandwidth > 0 such as 400Gbps or 50GB/s, got {label}={value!r}"
        )
    return rate


def _real(value: object) -> float:
    """`value` as a finite float; NaN (which fails every comparison) for anything else."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return math.nan
    try:
        x = float(value)
    except OverflowError:  # an integer beyond a float
        return math.nan
    return x if math.isfinite(x) else math.nan


def _planes(planes: object) -> str:
    """The name's mention of the planes: none for one (checked with the other sizes later)."""
    return f",{planes} planes" if isinstance(planes, numbers.Integral) and planes > 1 else ""
