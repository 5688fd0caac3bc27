"""A GPU cluster: servers with G GPUs each and an intra-server bandwidth, on an arsched topology.

Inter-server ring hops follow the topology's routes (one fewest-hop path per server pair, picked
among the equal-cost paths by a fixed hash, like ECMP); hops inside a server use the intra-server
bandwidth (NVLink/PCIe), which the topology does not model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from arsched.cluster.csvfile import read_csv
from arsched.errors import ArschedError
from arsched.limits import check_cluster
from arsched.topology import Topology, leafspine, parse_spec, star
from arsched.topology.io import HOSTLIST_COLUMNS
from arsched.units import parse_bandwidth

DEFAULT_GPUS = 8
MAX_GPUS_PER_SERVER = 4096  # GPUs in one server; real ones hold 8 or 16
DEFAULT_INTRA = 150e9  # bytes/s: an NVLink-class intra-server ring
TIRESIAS_COLUMNS = ("num_switch", "num_node_p_switch", "num_gpu_p_node")
CLUSTER_KEYS = ("gpus", "intra")
ECMP_LIMIT = 16  # a hop's route is one of the first 16 fewest-hop paths, picked by a hash


@dataclass
class Cluster:
    """Servers of `topology` (in locality order: grouped by their first switch), G GPUs each."""

    topology: Topology
    gpus_per_server: int = DEFAULT_GPUS
    intra_bandwidth: float = DEFAULT_INTRA
    name: str = ""

    def __post_init__(self) -> None:
        if not 1 <= self.gpus_per_server <= MAX_GPUS_PER_SERVER:
            raise ArschedError(
                f"a cluster needs 1 to {MAX_GPUS_PER_SERVER} GPUs per server, got {self.gpus_per_server}"
            )
        if not 0 < self.intra_bandwidth < np.inf:
            raise ArschedError(f"intra-server bandwidth must be finite and > 0, got {self.intra_bandwidth}")
        self.name = self.name or self.topology.name
        check_cluster(self.name, len(self.topology.servers), self.gpus_per_server)
        c = self.topology.compiled
        servers = self.topology.servers
        first = []
        for s in servers:
            i = c.index[s]
            nbrs = c.adjacency.indices[c.adjacency.indptr[i] : c.adjacency.indptr[i + 1]]
            first.append(int(nbrs.min()) if len(nbrs) else -1)
        order = np.lexsort((np.arange(len(servers)), np.array(first)))
        self.server_ids: tuple[str, ...] = tuple(servers[i] for i in order)
        self.node_index = np.array([c.index[s] for s in self.server_ids], dtype=np.int64)
        _, self.group = np.unique(np.array(first)[order], return_inverse=True)
        self.capacity = c.capacity
        out_cap = np.zeros(c.num_nodes)
        np.maximum.at(out_cap, c.link_src, c.capacity)
        self.nic = out_cap[self.node_index]  # fastest link out of each server
        shape = (self.num_servers, self.num_servers)
        self._table = np.zeros((*shape, 0), dtype=np.int32)  # routes, filled target by target
        self._lens = np.zeros(shape, dtype=np.int32)
        self._filled = np.zeros(self.num_servers, dtype=bool)
        # network.ring_links's memo: placement -> (links, hops per link)
        self.ring_cache: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def num_servers(self) -> int:
        return len(self.server_ids)

    @property
    def num_gpus(self) -> int:
        return self.num_servers * self.gpus_per_server

    @property
    def num_links(self) -> int:
        return len(self.capacity)

    def hop_links(self, a: int, b: int) -> np.ndarray:
        """Link indices of the route from server a to server b (cluster server indices)."""
        if not self._filled[b]:
            self.routes(np.array([b]))
        return self._table[b, a, : self._lens[b, a]]

    def routes(self, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The route table, (target x source x longest route) link indices, and the routes'
        lengths (target x source), with every server's route to each of `targets` filled in:
        routes to a target are found all at once, the first time one is asked for. Both arrays
        start as zeros the system hands out lazily, and a target's routes are one contiguous
        block, so memory grows with the targets used, not with servers squared."""
        todo = np.unique(targets[~self._filled[targets]]).tolist()
        router = self.topology.router
        router.prepare([self.server_ids[b] for b in todo])  # one batched BFS to them
        for b in todo:
            picks = np.arange(self.num_servers) * 7919 + b
            ptr, links = router.ecmp_picks(self.node_index, int(self.node_index[b]), picks, ECMP_LIMIT)
            lens = np.diff(ptr)
            if lens.max(initial=0) > self._table.shape[2]:  # a longer route: widen the table
                wider = np.zeros((*self._table.shape[:2], int(lens.max())), dtype=np.int32)
                wider[self._filled, :, : self._table.shape[2]] = self._table[self._filled]
                self._table = wider
            src = np.repeat(np.arange(self.num_servers), lens)
            self._table[b, src, np.arange(len(links)) - ptr[src]] = links
            self._lens[b] = lens
            self._filled[b] = True
        return self._table, self._lens

    def describe(self) -> str:
        return (
            f"{self.name}: {self.num_servers} servers x {self.gpus_per_server} GPUs, "
            f"intra-server {self.intra_bandwidth / 1e9:g} GB/s"
        )


def _split_keys(spec: str) -> tuple[str, dict[str, str]]:
    """Remove the cluster keys (gpus=, intra=) from a spec; the rest is a topology spec or path."""
    head, sep, rest = spec.partition(":")
    if Path(spec).is_file():
        return spec, {}
    items = [x.strip() for x in (rest.split(",") if sep else [])]
    if not sep and "," in head:  # a file path followed by ,gpus=...
        head, *items = [x.strip() for x in head.split(",")]
    own = {}
    kept = []
    for item in filter(None, items):
        key, _, value = (x.strip() for x in item.partition("="))
        if key in CLUSTER_KEYS:
            own[key] = value
        else:
            kept.append(item)
    topo = head + (":" + ",".join(kept) if sep else "")
    return topo, own


def _tiresias_spec(path: Path) -> tuple[Topology, int]:
    """A Tiresias cluster spec (switches x nodes per switch x GPUs per node) as a topology."""
    _, rows = read_csv(path, "cluster spec", rows=1)
    if not rows:
        raise ArschedError(f"{path} has a header but no cluster row")
    row = rows[0]
    try:
        sw, nodes, gpus = (int(row[k]) for k in TIRESIAS_COLUMNS)
    except (TypeError, ValueError):
        raise ArschedError(f"{path} row 2: {', '.join(TIRESIAS_COLUMNS)} must be integers") from None
    if min(sw, nodes, gpus) < 1:
        raise ArschedError(f"{path} row 2: switch, node and GPU counts must be >= 1")
    topo = star(nodes) if sw == 1 else leafspine(leaves=sw, spines=1, servers_per_leaf=nodes)
    return topo, gpus


def parse_cluster(spec: str, gpus: int | None = None, intra: float | None = None) -> Cluster:
    """A cluster from a topology spec with `gpus=G[,intra=BW]`, a Tiresias spec CSV or a host list.

    Tiresias specs become a star (one switch) or leaf-spine with one spine (their two-level tree).
    """
    topo_spec, own = _split_keys(spec.strip())
    raw = own.get("gpus")
    if raw is not None and not (raw.isascii() and raw.isdigit() and len(raw) <= 18):
        raise ArschedError(f"cluster spec {spec!r}: gpus must be a positive integer, got {raw!r}")
    g = int(raw) if raw is not None else None
    bw = parse_bandwidth(own["intra"]) if "intra" in own else None
    path = Path(topo_spec)
    if path.is_file() and path.suffix.lower() == ".csv":
        header, _ = read_csv(path, "cluster spec", rows=0)
        if all(c in header for c in TIRESIAS_COLUMNS):
            topo, g_file = _tiresias_spec(path)
            g = g if g is not None else g_file
        elif all(c in header for c in HOSTLIST_COLUMNS):
            topo = parse_spec(topo_spec)
        else:
            raise ArschedError(
                f"{path} is neither a Tiresias cluster spec ({','.join(TIRESIAS_COLUMNS)}) "
                f"nor a host list ({','.join(HOSTLIST_COLUMNS)})"
            )
    else:
        topo = parse_spec(topo_spec)
    g = next((x for x in (gpus, g) if x is not None), DEFAULT_GPUS)
    bw = next((x for x in (intra, bw) if x is not None), DEFAULT_INTRA)
    return Cluster(topo, int(g), float(bw), name=path.stem if path.is_file() else "")
