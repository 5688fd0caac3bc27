"""Topologies: the families, user graphs and files, their compiled arrays and routing."""

from arsched.topology.bcube import bcube
from arsched.topology.core import (
    DEFAULT_BANDWIDTH,
    DEFAULT_LATENCY,
    SERVER,
    SWITCH,
    CompiledTopology,
    Link,
    Topology,
)
from arsched.topology.dcell import dcell
from arsched.topology.fattree import fattree
from arsched.topology.gpucluster import hgx, mi250
from arsched.topology.io import from_dict, hostlist, load, save, to_dict
from arsched.topology.jellyfish import jellyfish
from arsched.topology.routing import Router
from arsched.topology.spec import FAMILIES, parse_spec
from arsched.topology.switched import leafspine, star
from arsched.topology.torus import ring, torus

__all__ = [
    "DEFAULT_BANDWIDTH",
    "DEFAULT_LATENCY",
    "FAMILIES",
    "SERVER",
    "SWITCH",
    "CompiledTopology",
    "Link",
    "Router",
    "Topology",
    "bcube",
    "dcell",
    "fattree",
    "from_dict",
    "hgx",
    "hostlist",
    "jellyfish",
    "leafspine",
    "load",
    "mi250",
    "parse_spec",
    "ring",
    "save",
    "star",
    "to_dict",
    "torus",
]
