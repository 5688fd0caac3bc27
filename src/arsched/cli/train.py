"""`arsched train`: train the learned hierarchical scheduler (`hrl`) on one or more networks."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer

from arsched.cli.common import SPEC_HELP, out, progress_bar
from arsched.errors import ArschedError
from arsched.rl.config import TrainConfig
from arsched.units import parse_size

D = TrainConfig.default


def train(
    topologies: Annotated[
        list[str], typer.Option("--topology", "-t", help=SPEC_HELP + " Repeat to train on several.")
    ],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Checkpoint folder (created or overwritten).")],
    iterations: Annotated[
        int,
        typer.Option(
            help="Iterations; each samples --group episodes on every network and updates "
            "(0: the warm start only)."
        ),
    ] = D("iterations"),
    group: Annotated[int, typer.Option(help="Episodes per network and iteration (at least 2).")] = D("group"),
    seed: Annotated[int, typer.Option(help="Seed of the weights and of every sampled episode.")] = D("seed"),
    size: Annotated[str, typer.Option(help="Message size the reward is measured at, e.g. 256MB.")] = "256MB",
    warm_start: Annotated[
        bool, typer.Option(help="First imitate the best fixed plan (--no-warm-start: from random weights).")
    ] = D("warm_start"),
    shared_teacher: Annotated[
        bool,
        typer.Option(
            help="With several networks, imitate the fastest plans of the one kind (tree shape, "
            "stages) that costs least on average, not each network's own best plan (slower to train)."
        ),
    ] = D("shared_teacher"),
    teacher_shapes: Annotated[
        str,
        typer.Option(
            help="With --shared-teacher: the teachers share only the chunk option (count, stages), "
            "and each network's takes the fastest of these tree shapes, comma-separated "
            "(e.g. spt,shallow); empty: one shape shared by all."
        ),
    ] = "",
    alternate: Annotated[
        bool,
        typer.Option(
            "--alternate/--joint",
            help="Sample one level per iteration while the other takes its best decisions (the "
            "paper's alternation), or both at once.",
        ),
    ] = D("alternate"),
    imitation_epochs: Annotated[int, typer.Option(help="Passes of the warm start's imitation.")] = D(
        "imitation_epochs"
    ),
    distill: Annotated[
        int,
        typer.Option(
            help="Most imitation passes to make a newly found best episode the policy's own, so "
            "it keeps what sampling found (0: policy gradient alone)."
        ),
    ] = D("distill"),
    hidden: Annotated[int, typer.Option(help="Width of every hidden layer.")] = D("hidden"),
    layers: Annotated[int, typer.Option(help="Message-passing rounds of the lower network.")] = D("layers"),
    temperature: Annotated[
        float, typer.Option(help="Temperature of the sampled rounds (below 1: nearer the policy's mode).")
    ] = D("temperature"),
    explore: Annotated[
        float,
        typer.Option(
            help="Exploration floor of sampled decisions: each flow goes with probability at least "
            "half of it either way, each option at least its share (0: none; the mode is unchanged)."
        ),
    ] = D("explore"),
    learning_rate: Annotated[float, typer.Option(help="Adam's step size.")] = D("learning_rate"),
    evaluate_every: Annotated[
        int, typer.Option(help="Iterations between evaluations of the deterministic policy.")
    ] = D("evaluate_every"),
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
) -> None:
    """Train the two-level policy of `--algorithm hrl` on the flow model's time.

    The upper network chooses the chunk count, pipeline stages and each chunk's flow tree among
    greedy-trees' shapes; the lower network (message passing over the round's
    flows and links) decides which of each round's available flows go now.
    The reward is the schedule's time in the flow model over the lower bound,
    at --size. Both networks first imitate the best fixed plan (the fastest
    chunk option, tree shape and round rule; --no-warm-start: random weights).
    Then each iteration samples --group episodes per network (one level
    sampled, the other at its best, alternating) and takes PPO's clipped step,
    each episode's advantage relative to its group; a better episode than any
    before is then distilled into the policy (--distill passes at most).
    The checkpoint keeps the weights whose deterministic schedules were best
    on the training networks; --out/log.csv holds the training curve. Then:
    `arsched schedule -t SPEC -a hrl --checkpoint OUT -o s.json`.
    """
    try:
        from arsched.rl.training import train as run_training
    except ImportError as e:
        raise ArschedError(f"arsched train needs the rl extra (pip install 'arsched[rl]'): {e}") from None
    command = ["arsched", "train", *(x for t in topologies for x in ("-t", t))]
    command += ["--iterations", str(iterations), "--group", str(group), "--seed", str(seed), "--size", size]
    command += [*([] if warm_start else ["--no-warm-start"]), *([] if alternate else ["--joint"])]
    command += ["--shared-teacher"] if shared_teacher else []
    shapes = tuple(x.strip() for x in teacher_shapes.split(",") if x.strip())
    command += ["--teacher-shapes", ",".join(shapes)] if shapes else []
    command += ["--imitation-epochs", str(imitation_epochs), "--distill", str(distill)]
    command += ["--hidden", str(hidden), "--layers", str(layers), "--temperature", str(temperature)]
    command += ["--explore", str(explore)]
    command += ["--learning-rate", str(learning_rate)]
    command += ["--evaluate-every", str(evaluate_every), "--out", str(out_dir)]
    cfg = TrainConfig(
        topologies,
        out=out_dir,
        iterations=iterations,
        group=group,
        seed=seed,
        nbytes=parse_size(size),
        warm_start=warm_start,
        shared_teacher=shared_teacher,
        teacher_shapes=shapes,
        alternate=alternate,
        imitation_epochs=imitation_epochs,
        distill=distill,
        hidden=hidden,
        layers=layers,
        temperature=temperature,
        explore=explore,
        learning_rate=learning_rate,
        evaluate_every=evaluate_every,
        extra_meta={"command": shlex.join(command)},
    )
    if not out_dir.parent.exists():
        raise ArschedError(f"cannot write {out_dir}: folder {out_dir.parent} does not exist")
    with progress_bar("training hrl", unit="episodes", enabled=progress) as update:
        meta = run_training(cfg, lambda what, done, total: update(done, total, what))
    gaps = ", ".join(
        f"{spec}: {g:.3f}x the bound (greedy-trees {b:.3f}x)"
        for spec, g, b in zip(meta["topologies"], meta["gaps"], meta["greedy_gaps"], strict=True)
    )
    out.print(f"wrote {out_dir} after {meta['train_seconds']:.1f} s: {gaps}")


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.command()(train)
