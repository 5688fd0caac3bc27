"""SHA-256 of every algorithm's schedule on a few networks: proof that a refactor changes no output.

Run it before and after a change and compare the two files (`diff` or `--check`):

    python benchmarks/fingerprints.py > before.txt
    ... change the code ...
    python benchmarks/fingerprints.py --check before.txt

Each line is `network algorithm size params sha256` of the schedule's `arsched.schedule/1` JSON
(or `not-applicable` with the reason's hash). The networks mix families (BCube, DCell, torus,
Jellyfish, fat-tree, a heterogeneous leaf-spine) so that every code path of tree packing (LP,
pipeline, unpipelined stars, balanced steps) and of the topology-specific schemes runs.
"""

from __future__ import annotations

import argparse
import hashlib
import sys

from arsched.algorithms import NotApplicable, algorithms, build
from arsched.collective.serialize import dumps
from arsched.topology import parse_spec

NETWORKS = (
    "bcube:n=3,k=1",
    "dcell:n=2,k=1",
    "torus:dims=3x3",
    "jellyfish:switches=8,ports=4,net_ports=3,seed=3",
    "fattree:k=4",
    "leafspine:leaves=3,spines=2,servers_per_leaf=2,bandwidth=100Gbps/400Gbps",
)
SIZES = (1e6, 256e6)
VARIANTS = {"tree-packing": ({}, {"levels": False}, {"levels": True})}


def fingerprints() -> list[str]:
    """One line per (network, algorithm, size, parameter variant)."""
    lines = []
    for spec in NETWORKS:
        topo = parse_spec(spec)
        for algo in algorithms():
            for size in SIZES:
                for params in VARIANTS.get(algo.name, ({},)):
                    try:
                        text = dumps(build(algo.name, topo, None, size, **params))
                    except NotApplicable as e:
                        text = "not-applicable " + str(e)
                    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
                    label = ",".join(f"{k}={v}" for k, v in params.items()) or "-"
                    lines.append(f"{spec} {algo.name} {size:g} {label} {digest}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", help="a file written by an earlier run; exit 1 on any difference")
    args = parser.parse_args()
    lines = fingerprints()
    if args.check is None:
        print("\n".join(lines))
        return 0
    with open(args.check) as f:
        before = f.read().split("\n")
    diff = sorted((set(before) ^ set(lines)) - {""})
    for line in diff:
        print(("- " if line in before else "+ ") + line)
    print(f"{len(lines)} schedules, {len(diff)} lines differ")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
