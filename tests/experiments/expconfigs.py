"""Small experiment configs shared by the tests in this folder."""

SMALL = """\
name: small
description: two topologies, three algorithms, two sizes, both models
runs:
  - kind: algorithm
    topologies: ["ring:n=4", "jellyfish:switches=4,ports=3,net_ports=2"]
    algorithms: [ps, ring, {name: rhd, label: halving-doubling}]
    sizes: [1MB, 64MB]
    seeds: [1, 2]
    models: [flow, rounds]
"""
