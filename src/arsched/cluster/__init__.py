"""GPU-cluster scheduling of ring-all-reduce jobs (GADGET, INFOCOM'22, and baselines).

A slot-based simulator places the rings of training jobs on the servers of any arsched topology
and evaluates every decision under a network mode: `reserved` (GADGET's model: bandwidth
reserved per ring), `shared` (rings share links max-min fairly, the flow model's sharing) or
`ideal` (every ring alone on the network, the contention-blind view).
"""

from arsched.cluster.cluster import Cluster, parse_cluster
from arsched.cluster.config import SimConfig
from arsched.cluster.jobs import Workload
from arsched.cluster.metrics import ClusterResult
from arsched.cluster.simulator import simulate
from arsched.cluster.traces import load_trace

__all__ = ["Cluster", "ClusterResult", "SimConfig", "Workload", "load_trace", "parse_cluster", "simulate"]
