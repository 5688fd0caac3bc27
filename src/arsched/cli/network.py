"""`arsched topology` and `arsched bound`: look at a network and its AllReduce lower bound."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.table import Table

from arsched.cli.common import SPEC_HELP, check_output, emit_json, out
from arsched.errors import ArschedError


def _ports(topo: Any) -> int | list[int]:
    ports = sorted({topo.ports(s) for s in topo.servers})
    return ports[0] if len(ports) == 1 else [ports[0], ports[-1]]


def _diameter(topo: Any) -> int | list[int]:
    from arsched.topology.diameter import server_diameter

    d = server_diameter(topo)  # [low, high] where the work to settle it would be too much
    return d.low if d.exact else [d.low, d.high]


def check_finite(values: dict[str, Any], what: str) -> None:
    """Refuse results that overflow a float (links of near-zero bandwidth, absurd sizes): JSON has
    no infinity and a table would print one as if it were an answer."""
    for key, value in values.items():
        if isinstance(value, dict):
            check_finite(value, what)
        elif isinstance(value, float) and not np.isfinite(value):
            raise ArschedError(
                f"the {key.replace('_', ' ')} of {what} is {value}: it is beyond the largest float "
                "(1.8e308); check the sizes and link bandwidths given"
            )


def topology(
    spec: Annotated[str, typer.Argument(help=SPEC_HELP, show_default=False)],
    out_file: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Write the topology as .json (the schedule format's topology object) or .graphml.",
        ),
    ] = None,
    draw: Annotated[Path | None, typer.Option(help="Draw the network to a PNG file.")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print machine-readable JSON instead of a table.")
    ] = False,
) -> None:
    """Describe a network: servers, switches, links, ports, diameter and the AllReduce bound.

    The bound is 2·T*_AG per byte of the vector (ForestColl's cut bound, exact): multiply by
    the AllReduce size in bytes to get the least time any schedule can take.
    """
    from arsched.bounds import allgather_cut
    from arsched.topology import parse_spec, save

    check_output(out_file, (".json", ".graphml"), "--out")
    check_output(draw, (".png",), "--draw")
    topo = parse_spec(spec)
    cut = allgather_cut(topo)
    info = {
        "name": topo.name,
        "servers": len(topo.servers),
        "switches": len(topo.switches),
        "directed_links": len(topo.links),
        "ports_per_server": _ports(topo),
        "diameter_hops": _diameter(topo),
        "allreduce_bound_s_per_byte": 2 * cut.seconds_per_byte,
    }
    check_finite(info, topo.name)
    if out_file is not None:
        save(topo, out_file)
    if draw is not None:
        from arsched.viz.plots import draw_topology

        draw_topology(topo, draw)
    if as_json:
        emit_json(info)
        return
    bw = np.array([lk.bandwidth for lk in topo.links])
    table = Table(title=topo.name, show_header=False)
    for key, val in info.items():
        if key != "name":
            table.add_row(key.replace("_", " "), f"{val:.4g}" if isinstance(val, float) else str(val))
    lo, hi = (f"{x / 1e9 * 8:g}" for x in (bw.min(), bw.max()))
    table.add_row("link bandwidth", f"{lo} Gb/s" if lo == hi else f"{lo}–{hi} Gb/s")
    table.add_row(
        "bound for 1 GB",
        f"{2 * cut.seconds_per_byte * 1e9 * 1e3:.3f} ms "
        f"(binding cut: {cut.ranks_inside} ranks behind {cut.egress * 8 / 1e9:g} Gb/s)",
    )
    out.print(table)
    for path in (out_file, draw):
        if path is not None:
            out.print(f"wrote {path}")


def bound(
    topology_spec: Annotated[str, typer.Option("--topology", "-t", help=SPEC_HELP, show_default=False)],
    size: Annotated[
        str, typer.Option("--size", "-s", help="AllReduce size per rank: 100MB, 1GiB, 4096 (bytes).")
    ] = "100MB",
    alpha: Annotated[
        str, typer.Option(help="Per-transfer overhead added to the latency bound, e.g. 5us.")
    ] = "0s",
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Lower bounds for an AllReduce of SIZE bytes on all servers of a topology.

    allreduce = 2·T*_AG (bandwidth, exact cut bound); allgather = T*_AG; latency = alpha plus
    the largest rank-to-rank path latency. No schedule can beat max(allreduce, latency).
    """
    from arsched.bounds import allgather_cut, latency_bound
    from arsched.topology import parse_spec
    from arsched.units import parse_size, parse_time

    nbytes = parse_size(size)
    if nbytes <= 0:
        raise ArschedError(f"--size must be positive, got {size!r}")
    a = parse_time(alpha)
    topo = parse_spec(topology_spec)
    cut = allgather_cut(topo)
    ag = cut.seconds_per_byte * nbytes
    lat = latency_bound(topo, alpha=a)
    info = {
        "topology": topo.name,
        "ranks": len(topo.servers),
        "bytes": nbytes,
        "allreduce_bound_s": 2 * ag,
        "allgather_bound_s": ag,
        "latency_bound_s": lat,
        "lower_bound_s": max(2 * ag, lat),
        "binding_cut": {
            "ranks_inside": cut.ranks_inside,
            "egress_bytes_per_s": cut.egress,
            "nodes": len(cut.cut),
        },
        "exact": cut.exact,
    }
    check_finite(info, f"{size} on {topo.name}")
    if as_json:
        emit_json(info)
        return
    table = Table(title=f"AllReduce of {size} on {topo.name} ({len(topo.servers)} ranks)", show_header=False)
    table.add_row("allreduce bound (bandwidth)", f"{2 * ag * 1e3:.4f} ms")
    table.add_row("allgather bound", f"{ag * 1e3:.4f} ms")
    table.add_row("latency bound", f"{lat * 1e6:.2f} µs")
    table.add_row(
        "binding cut", f"{cut.ranks_inside} of {len(topo.servers)} ranks behind {cut.egress * 8 / 1e9:g} Gb/s"
    )
    out.print(table)


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.command()(topology)
    app.command()(bound)
