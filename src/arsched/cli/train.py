"""`arsched train`: train the hierarchical deep-RL scheduler (`hrl`) on one or more topologies."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer

from arsched.cli.common import SPEC_HELP, out, progress_bar
from arsched.errors import ArschedError
from arsched.rl.config import TrainConfig

D = TrainConfig.default


def _net_arch(text: str) -> tuple[int, ...]:
    """Layer widths from "64,64" (TrainConfig checks that they are positive)."""
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise ArschedError(f"--net-arch must be positive layer widths joined by ',', got {text!r}") from None


def train(
    topologies: Annotated[
        list[str], typer.Option("--topology", "-t", help=SPEC_HELP + " Repeat to train on several.")
    ],
    out_dir: Annotated[
        Path, typer.Option("--out", "-o", help="Checkpoint folder (created; overwritten unless --resume).")
    ],
    steps: Annotated[int, typer.Option(help="Environment steps of both levels in total.")] = D("steps"),
    seed: Annotated[int, typer.Option(help="Seed of the networks, PPO and the environments.")] = D("seed"),
    phases: Annotated[
        int, typer.Option(help="Training phases, alternating lower, upper, lower, ... level.")
    ] = D("phases"),
    upper_share: Annotated[
        float, typer.Option(help="Share of the steps for the upper level (each of its steps is a round).")
    ] = D("upper_share"),
    warm_start: Annotated[
        bool,
        typer.Option(
            help="First imitate greedy-trees, then improve with PPO (--no-warm-start: from scratch)."
        ),
    ] = D("warm_start"),
    self_imitation: Annotated[
        int,
        typer.Option(
            help="After each PPO phase, sample K episodes and fit both networks to the best (0: off)."
        ),
    ] = D("self_imitation"),
    explore: Annotated[
        float,
        typer.Option(
            help="In those K episodes, the chance that a flow pick is sampled instead of the policy's best."
        ),
    ] = D("explore"),
    chunks: Annotated[
        int | None, typer.Option(help="Chunks = flow trees (default: the count greedy-trees picks).")
    ] = D("chunks"),
    net_arch: Annotated[str, typer.Option(help="Hidden layer widths of both networks.")] = ",".join(
        map(str, D("net_arch"))
    ),
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the checkpoint in --out after its last phase.")
    ] = D("resume"),
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
) -> None:
    """Train the two-level policy of `--algorithm hrl` with MaskablePPO, alternating levels.

    The upper level selects flow trees each round, the lower level picks the round's flows one
    at a time; the reward is −1 per round. Both networks first imitate greedy-trees; after
    each PPO phase they are fitted to the best of K episodes that depart from the policy at a
    few sampled flow picks (self-imitation, `--explore`); a phase that adds rounds on the
    training topologies is rolled back. Every phase ends with an atomic checkpoint in --out
    (weights, optimiser states, meta.json) and a line of --out/log.csv. Then:
    `arsched schedule -t SPEC -a hrl --checkpoint OUT -o s.json`.
    """
    try:
        from arsched.rl.checkpoint import check_net_arch
        from arsched.rl.training import train as run_training
    except ImportError as e:
        raise ArschedError(f"arsched train needs the rl extra (pip install 'arsched[rl]'): {e}") from None
    command = ["arsched", "train", *(x for t in topologies for x in ("-t", t)), "--steps", str(steps)]
    command += ["--seed", str(seed), "--phases", str(phases), "--upper-share", str(upper_share)]
    command += ["--self-imitation", str(self_imitation), "--explore", str(explore)]
    command += ["--net-arch", net_arch, *(["--chunks", str(chunks)] if chunks else [])]
    command += [*([] if warm_start else ["--no-warm-start"]), "--out", str(out_dir)]
    cfg = TrainConfig(
        topologies,
        out=out_dir,
        steps=steps,
        seed=seed,
        phases=phases,
        upper_share=upper_share,
        warm_start=warm_start,
        self_imitation=self_imitation,
        explore=explore,
        chunks=chunks,
        net_arch=check_net_arch(_net_arch(net_arch), "--net-arch"),
        resume=resume,
        extra_meta={"command": shlex.join(command)},
    )
    if not out_dir.parent.exists():
        raise ArschedError(f"cannot write {out_dir}: folder {out_dir.parent} does not exist")
    with progress_bar("training hrl", unit="steps", enabled=progress) as update:
        meta = run_training(cfg, lambda what, done, total: update(done, total, what))
    rounds = ", ".join(
        f"{spec}: {r} rounds (greedy-trees {g})"
        for spec, r, g in zip(meta["topologies"], meta["rounds"], meta["greedy_rounds"], strict=True)
    )
    out.print(f"wrote {out_dir} after {meta['train_seconds']:.1f} s: {rounds}")


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.command()(train)
