"""What is inside one GPU server ("box"): its GPUs, the links between them, and the published
numbers behind them. The cluster fabric around the boxes is `gpufabric.py`.

Bandwidths are per direction (a cable is two directed links), in bytes per second:

- NVIDIA HGX A100 8-GPU (inside DGX A100): every GPU has 12 third-generation NVLinks of
  25 GB/s to the six NVSwitches, 300 GB/s per direction (the A100 datasheet's "600 GB/s" NVLink
  is both directions); one ConnectX-6 HDR InfiniBand NIC per GPU, 200 Gb/s, on a PCIe Gen4 x16
  switch shared with its GPU (31.5 GB/s per direction). Source: NVIDIA DGX A100 System
  Architecture whitepaper and user guide.
- NVIDIA HGX H100 8-GPU (inside DGX H100): 18 fourth-generation NVLinks of 25 GB/s to four
  NVSwitches, 450 GB/s per direction ("900 GB/s" both ways); one ConnectX-7 NDR NIC per GPU,
  400 Gb/s, on PCIe Gen5 x16 (63 GB/s). Source: NVIDIA H100 datasheet, DGX H100 user guide.
  The NVSwitches of a box are modelled as one non-blocking switch node, as ForestColl does
  (github.com/liangyuRain/ForestColl, topologies.py).
- AMD MI250 8-OAM box: 8 MI250 modules of 2 GCDs each, 16 GCDs (the ranks), joined directly
  by Infinity Fabric (xGMI) links of 50 GB/s per direction (AMD's "100 GB/s" per link is both
  directions), no switch. The two GCDs of a module share 4 links (200 GB/s); the links between
  modules follow the platform's published pattern as ForestColl's topologies.py encodes it
  (7 links per GCD, `MI250_PATTERN` below lists them as we read that pattern). ForestColl gives
  every GCD 16 GB/s to the network; we keep that figure (128 Gb/s per GCD) as the default.

Latencies are one-way per link and are our assumption, chosen so that paths add up to the
per-hop hardware latencies of NCCL's tuning model (src/graph/tuning.cc, `hwLat`, ring/LL):
NVLink 0.6 µs per GPU-to-GPU hop (two links through the NVSwitch, 0.3 µs each; one direct xGMI
link 0.6 µs), PCI 1.0 µs (the GPU-NIC link at both ends, 0.5 µs each) and network 2.7 µs (both
PCIe links plus NIC-leaf and leaf-NIC, 0.8 µs each: 2.6 µs); a leaf-spine link adds 0.5 µs.
"""

from __future__ import annotations

from dataclasses import dataclass

GB = 1e9  # bytes per second in one GB/s
GBIT = 1e9 / 8  # bytes per second in one Gb/s


@dataclass(frozen=True)
class Generation:
    """The published numbers of one GPU box generation (per direction, bytes/s)."""

    intra: float  # per GPU to the NVSwitch, or per xGMI link
    pcie: float  # GPU to its NIC
    nic: float  # NIC to the leaf switch
    su: int  # boxes per scalable unit of the rail fabric (NVIDIA SuperPOD reference designs)


GENERATIONS = {
    # the DGX A100 SuperPOD's scalable unit is 20 boxes, the DGX H100 SuperPOD's 32
    "a100": Generation(intra=300 * GB, pcie=31.5 * GB, nic=200 * GBIT, su=20),
    "h100": Generation(intra=450 * GB, pcie=63 * GB, nic=400 * GBIT, su=32),
    # MI250: 50 GB/s per xGMI link; ForestColl's 16 GB/s per GCD to the network; no reference
    # SuperPOD, so the H100's scalable unit of 32 boxes
    "mi250": Generation(intra=50 * GB, pcie=31.5 * GB, nic=128 * GBIT, su=32),
}

LATENCY = (0.3e-6, 0.5e-6, 0.8e-6, 0.5e-6)
"""One-way latency per level: 0 NVLink (GPU-NVSwitch; an xGMI link takes twice this, see
`XGMI_LATENCY`), 1 PCIe (GPU-NIC), 2 NIC-leaf (or ToR), 3 leaf-spine."""

XGMI_LATENCY = 0.6e-6
"""A direct xGMI link: one GPU-to-GPU hop, as NCCL's NVLink hop."""

MI250_GCDS = 16
MI250_PAIR_LINKS = 4  # links between the two GCDs of one module

# The links between modules of one half of the box (GCDs 0-7), as (gcd, gcd, links): the other
# half (GCDs 8-15) repeats it shifted by 8, and the two halves are joined by `MI250_CROSS`.
MI250_HALF = ((0, 4, 2), (3, 7, 2), (1, 5, 1), (2, 6, 1), (4, 6, 1), (5, 6, 1), (5, 7, 1))
MI250_CROSS = ((0, 8, 1), (3, 11, 1), (1, 9, 1), (2, 10, 1), (1, 10, 1), (2, 9, 1))


def mi250_pattern() -> tuple[tuple[int, int, int], ...]:
    """Every xGMI cable of an MI250 box as (gcd, gcd, links), each pair once: the module pairs
    (2g, 2g+1) with 4 links, both halves, and the cables across them; 7 links per GCD."""
    pairs = [(2 * m, 2 * m + 1, MI250_PAIR_LINKS) for m in range(MI250_GCDS // 2)]
    half = MI250_GCDS // 2
    pairs += [(a + shift, b + shift, n) for shift in (0, half) for a, b, n in MI250_HALF]
    return tuple(pairs + list(MI250_CROSS))


@dataclass(frozen=True)
class Box:
    """The inside of one box: `gpus` ranks, either all on one switch (`switch` bytes/s per GPU,
    the NVSwitch) or joined directly by `mesh` cables (gpu, gpu, bytes/s)."""

    kind: str  # 'hgx' or 'mi250', for node names and messages
    gpus: int
    switch: float | None = None
    mesh: tuple[tuple[int, int, float], ...] = ()

    def cables(self) -> int:
        """The box's own cables (GPU-switch or GPU-GPU)."""
        return self.gpus if self.switch is not None else len(self.mesh)


def nvswitch_box(gpus: int, nvlink: float) -> Box:
    """`gpus` GPUs on one NVSwitch node, `nvlink` bytes/s per GPU each way."""
    return Box("hgx", gpus, switch=nvlink)


def mi250_box(xgmi: float) -> Box:
    """The 16 GCDs of an MI250 box in their direct xGMI mesh, `xgmi` bytes/s per link each way."""
    return Box("mi250", MI250_GCDS, mesh=tuple((a, b, n * xgmi) for a, b, n in mi250_pattern()))
