"""The Topology: servers and switches joined by directed links with bandwidth and latency.

A cable is two directed links (full duplex). Servers may forward traffic (BCube, DCell and tori
are server-centric); switches never hold data. Every link has a finite bandwidth of at least
`MIN_BANDWIDTH` (below it, no transfer time a float can hold) and a finite latency >= 0. A
Topology is immutable once built; its compiled array form (for simulators and bounds) and its
router are computed once and cached.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from arsched.errors import TopologyError
from arsched.topology.compiled import CompiledTopology
from arsched.topology.routing import Router

if TYPE_CHECKING:
    import networkx as nx

SERVER = "server"
SWITCH = "switch"
KINDS = (SERVER, SWITCH)

DEFAULT_BANDWIDTH = 100e9 / 8  # 100 Gb/s in bytes per second
DEFAULT_LATENCY = 1e-6  # 1 microsecond per link
MIN_BANDWIDTH = sys.float_info.min
"""The least bandwidth a link may have (2.2e-308 bytes/s, the smallest normal float): a subnormal
one is refused, since a transfer's time (bytes / bandwidth) over it overflows for any size above
a few bytes, and 1 / bandwidth already for those below 5.6e-309."""


@dataclass(frozen=True)
class Link:
    """One directed link: `bandwidth` in bytes/s, `latency` in seconds."""

    src: str
    dst: str
    bandwidth: float = DEFAULT_BANDWIDTH
    latency: float = DEFAULT_LATENCY


class Topology:
    """A network: nodes of kind 'server' or 'switch' and directed links between them.

    Build one with a family constructor (`bcube`, `fattree`, ...), from a networkx graph
    (`Topology.from_networkx`), a file (`arsched.topology.load`), or directly from nodes and
    links. Ranks of collectives are servers; `servers` keeps the construction order.

    `spread_order` lists servers in the order in which d-mod-k spreading reads destinations
    (`Router.link_paths`; the others follow in node order): d-mod-k balances traffic over
    equal-cost paths when hosts are numbered along the tree (as a fat-tree's are), and a
    family whose construction order is not that order gives it (a GPU cluster's rail leaves
    gather one GPU of every box: its GPUs numbered box by box put every rail's traffic on one
    spine).
    """

    def __init__(
        self,
        name: str,
        nodes: Iterable[tuple[str, str]],
        links: Iterable[Link | tuple],
        spread_order: Iterable[str] = (),
    ) -> None:
        self.name = str(name)
        kinds: dict[str, str] = {}
        for node_id, kind in nodes:
            if not isinstance(node_id, str) or not node_id:
                raise TopologyError(f"node id {node_id!r} in {self.name} is not a non-empty string")
            if kind not in KINDS:
                raise TopologyError(
                    f"node {node_id!r} in {self.name} has kind {kind!r}; it must be 'server' or 'switch'"
                )
            if node_id in kinds:
                raise TopologyError(f"node {node_id!r} appears twice in {self.name}")
            kinds[node_id] = kind
        self._kinds = kinds
        seen: set[tuple[str, str]] = set()
        out: list[Link] = []
        for item in links:
            try:
                link = item if isinstance(item, Link) else Link(*item)
            except TypeError:
                raise TopologyError(
                    f"link {item!r} in {self.name} must be (src, dst, bandwidth, latency)"
                ) from None
            self._check_link(link, seen)
            seen.add((link.src, link.dst))
            out.append(link)
        self._links = tuple(out)
        if not math.isfinite(sum(float(lk.bandwidth) for lk in out)):  # every cut's egress is a float
            raise TopologyError(
                f"the link bandwidths of {self.name} add up to more than a float holds (1.8e308 bytes/s)"
            )
        if not any(k == SERVER for k in kinds.values()):
            raise TopologyError(f"topology {self.name} has no server")
        self._spread_order = tuple(spread_order)
        if any(kinds.get(x) != SERVER for x in self._spread_order) or len(set(self._spread_order)) != len(
            self._spread_order
        ):
            raise TopologyError(f"the spread order of {self.name} must list distinct servers of it")

    def _check_link(self, link: Link, seen: set[tuple[str, str]]) -> None:
        for end in (link.src, link.dst):
            if not isinstance(end, str) or end not in self._kinds:
                raise TopologyError(f"link {link.src}->{link.dst} in {self.name} names unknown node {end!r}")
        if link.src == link.dst:
            raise TopologyError(f"link {link.src}->{link.dst} in {self.name} is a self-loop")
        if (link.src, link.dst) in seen:
            raise TopologyError(
                f"link {link.src}->{link.dst} appears twice in {self.name}; "
                "merge parallel links into one with their summed bandwidth"
            )
        bw, lat = link.bandwidth, link.latency
        if not (isinstance(bw, (int, float)) and _finite(bw) and bw > 0):
            raise TopologyError(
                f"link {link.src}->{link.dst} has bandwidth {bw!r}; it must be a finite number > 0"
            )
        if bw < MIN_BANDWIDTH:
            raise TopologyError(
                f"link {link.src}->{link.dst} in {self.name} has bandwidth {bw!r} bytes/s, below the "
                f"smallest normal float ({MIN_BANDWIDTH:.3g}): over it a transfer of a few bytes would "
                "take longer than a float can hold"
            )
        if not (isinstance(lat, (int, float)) and _finite(lat) and lat >= 0):
            raise TopologyError(
                f"link {link.src}->{link.dst} has latency {lat!r}; it must be a finite number >= 0"
            )

    @classmethod
    def from_cables(
        cls,
        name: str,
        servers: Iterable[str],
        switches: Iterable[str],
        cables: Iterable[tuple[str, str, float, float]],
        spread_order: Iterable[str] = (),
    ) -> Topology:
        """A topology from full-duplex cables (u, v, bandwidth, latency): two links each."""
        nodes = [(s, SERVER) for s in servers] + [(w, SWITCH) for w in switches]
        links = []
        for u, v, bw, lat in cables:
            links.append(Link(u, v, bw, lat))
            links.append(Link(v, u, bw, lat))
        return cls(name, nodes, links, spread_order)

    # ---- read access -------------------------------------------------------------------
    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(self._kinds)

    @property
    def links(self) -> tuple[Link, ...]:
        return self._links

    @property
    def spread_order(self) -> tuple[str, ...]:
        return self._spread_order

    @cached_property
    def servers(self) -> tuple[str, ...]:
        return tuple(n for n, k in self._kinds.items() if k == SERVER)

    @cached_property
    def switches(self) -> tuple[str, ...]:
        return tuple(n for n, k in self._kinds.items() if k == SWITCH)

    def kind(self, node: str) -> str:
        """'server' or 'switch'; a TopologyError for an unknown node."""
        try:
            return self._kinds[node]
        except KeyError:
            raise TopologyError(f"node {node!r} is not in topology {self.name}") from None

    def __contains__(self, node: object) -> bool:
        return node in self._kinds

    @cached_property
    def _link_map(self) -> dict[tuple[str, str], Link]:
        return {(lk.src, lk.dst): lk for lk in self._links}

    def has_link(self, src: str, dst: str) -> bool:
        return (src, dst) in self._link_map

    def link(self, src: str, dst: str) -> Link:
        """The directed link src -> dst; a TopologyError if there is none."""
        try:
            return self._link_map[(src, dst)]
        except KeyError:
            raise TopologyError(f"there is no link {src}->{dst} in {self.name}") from None

    def ports(self, node: str) -> int:
        """Number of outgoing links of a node (its ports, for a full-duplex network)."""
        self.kind(node)  # a TopologyError for an unknown node
        c = self.compiled
        return int(c.adjacency.indptr[c.index[node] + 1] - c.adjacency.indptr[c.index[node]])

    def __repr__(self) -> str:
        return (
            f"Topology({self.name!r}, servers={len(self.servers)}, switches={len(self.switches)}, "
            f"links={len(self._links)})"
        )

    def __eq__(self, other: object) -> bool:
        if other is self:  # the caches keyed by topology ask this on every lookup
            return True
        if not isinstance(other, Topology):
            return NotImplemented
        # the same network whatever the order its links were listed in
        return (self.name, self._kinds, set(self._links)) == (other.name, other._kinds, set(other._links))

    def __hash__(self) -> int:
        return hash((self.name, len(self._kinds), len(self._links)))

    # ---- derived forms -----------------------------------------------------------------
    @cached_property
    def compiled(self) -> CompiledTopology:
        """Integer-indexed arrays (node and link indices, capacity and latency vectors)."""
        node_ids = self.nodes
        index = {n: i for i, n in enumerate(node_ids)}
        n = len(node_ids)
        src = np.fromiter((index[lk.src] for lk in self._links), dtype=np.int32, count=len(self._links))
        dst = np.fromiter((index[lk.dst] for lk in self._links), dtype=np.int32, count=len(self._links))
        cap = np.fromiter((lk.bandwidth for lk in self._links), dtype=np.float64, count=len(self._links))
        lat = np.fromiter((lk.latency for lk in self._links), dtype=np.float64, count=len(self._links))
        adjacency = sp.csr_array((np.arange(1, len(src) + 1, dtype=np.int64), (src, dst)), shape=(n, n))
        adjacency.sort_indices()
        is_server = np.fromiter((self._kinds[x] == SERVER for x in node_ids), dtype=bool, count=n)
        return CompiledTopology(node_ids, index, is_server, src, dst, cap, lat, adjacency)

    @cached_property
    def spread_key(self) -> np.ndarray:
        """Each node's (by index) place in the order d-mod-k spreading reads destinations in:
        `spread_order` first, then the other nodes in node order."""
        c = self.compiled
        key = np.arange(c.num_nodes, dtype=np.int64)
        if self._spread_order:
            listed = np.array([c.index[x] for x in self._spread_order], dtype=np.int64)
            rest = np.setdiff1d(key, listed)  # sorted: node order
            key[np.concatenate([listed, rest])] = np.arange(c.num_nodes)
        return key

    @cached_property
    def router(self) -> Router:
        """Deterministic fewest-hop routing with ECMP and k-shortest alternatives (cached)."""
        return Router(self)

    def path(self, src: str, dst: str) -> tuple[str, ...]:
        """The default route src -> dst: fewest hops, lowest node index at every tie."""
        return self.router.path(src, dst)

    def to_networkx(self) -> nx.DiGraph:
        """A networkx DiGraph with node attribute `kind` and edge attributes bandwidth, latency."""
        import networkx as nx

        g = nx.DiGraph(name=self.name)
        for node, kind in self._kinds.items():
            g.add_node(node, kind=kind)
        for lk in self._links:
            g.add_edge(lk.src, lk.dst, bandwidth=lk.bandwidth, latency=lk.latency)
        return g

    @classmethod
    def from_networkx(
        cls,
        graph: nx.Graph,
        name: str | None = None,
        bandwidth: float = DEFAULT_BANDWIDTH,
        latency: float = DEFAULT_LATENCY,
    ) -> Topology:
        """A topology from a user's networkx graph.

        Nodes need a `kind` attribute ('server' or 'switch'). An undirected edge becomes a
        cable (two links); a directed edge one link. Edges may carry `bandwidth` (bytes/s) and
        `latency` (s); missing ones take the given defaults. Node ids are turned into strings.
        """
        gname = name or graph.graph.get("name") or "graph"
        nodes = []
        for node, data in graph.nodes(data=True):
            if "kind" not in data:
                raise TopologyError(
                    f"node {node!r} of graph {gname!r} has no 'kind' attribute; "
                    "set it to 'server' or 'switch'"
                )
            nodes.append((str(node), data["kind"]))
        links = []
        for u, v, data in graph.edges(data=True):
            bw, lat = (
                _number(data.get(key, default), f"{key} of edge {u!r}-{v!r} of graph {gname!r}")
                for key, default in (("bandwidth", bandwidth), ("latency", latency))
            )
            links.append(Link(str(u), str(v), bw, lat))
            if not graph.is_directed():
                links.append(Link(str(v), str(u), bw, lat))
        return cls(gname, nodes, links)


def _finite(x: float) -> bool:
    """True for a finite number; False also for an integer too large for a float."""
    try:
        return math.isfinite(x)
    except OverflowError:
        return False


def _number(value: object, what: str) -> float:
    """`value` as a float (GraphML attributes may be strings); a TopologyError if it is none."""
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise TopologyError(f"the {what} is {value!r}, which is not a number") from None


def is_int(value: object) -> bool:
    """True for Python and numpy integers (not bools): family sizes accept both."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def per_level(value: float | Sequence[float], levels: int, what: str, family: str) -> list[float]:
    """A value per level: a scalar for all levels, or a sequence with one entry per level."""
    if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        return [float(value)] * levels
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence | np.ndarray):
        raise TopologyError(f"{family}: {what} must be a number or a list of numbers, got {value!r}")
    try:
        vals = [float(v) for v in value]
    except (TypeError, ValueError):
        raise TopologyError(
            f"{family}: {what} must be a number or a list of numbers, got {value!r}"
        ) from None
    if len(vals) != levels:
        raise TopologyError(f"{family} has {levels} link level(s) but {len(vals)} {what} values were given")
    return vals
