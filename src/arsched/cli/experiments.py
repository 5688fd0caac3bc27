"""`arsched sweep` and `arsched report`: a config's runs on a process pool or Ray, then one HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from arsched.cli.common import out
from arsched.errors import ArschedError
from arsched.fileio import write_atomic


def sweep_cmd(
    config: Annotated[
        Path,
        typer.Argument(help="An experiment config (YAML), e.g. experiments/demo.yaml.", show_default=False),
    ],
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Results folder (default: arsched-runs/<config name>)."),
    ] = None,
    backend: Annotated[
        str, typer.Option(help="local (a process pool) or ray (one Ray task per run).")
    ] = "local",
    address: Annotated[
        str | None,
        typer.Option(help="Ray cluster to join, e.g. ray://head:10001 or auto (default: start a local one)."),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(help="Local processes, or CPUs of a local Ray (default: all cores; 1 runs in-process)."),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List the tasks still to run and stop.")] = False,
    max_tasks: Annotated[
        int | None,
        typer.Option(
            help="Refuse a config whose grids may hold more tasks than this (default: 100,000).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run every task of an experiment config, appending one CSV row per task as it finishes.

    A config is a grid per run block (topologies × algorithms × sizes × seeds × models; see
    experiments/*.yaml). Rows go to OUT/<kind>.csv and are flushed to disk one by one, so a sweep
    that is stopped loses only the runs in flight; run the same command again and it skips
    every task already in the results (tasks are identified by a hash of their parameters).
    Exit 1 if a task failed (the others are kept). Then: arsched report OUT --out report/.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from arsched.experiments import expand, load_config, sweep
    from arsched.experiments.tasks.registry import MAX_TASKS

    if backend not in ("local", "ray"):
        raise ArschedError(f"--backend must be local or ray, got {backend!r}")
    if workers is not None and workers < 1:
        raise ArschedError(f"--workers must be at least 1, got {workers}")
    if address and backend != "ray":
        raise ArschedError("--address needs --backend ray")
    cfg = load_config(config)
    tasks = expand(cfg, MAX_TASKS if max_tasks is None else max_tasks)
    folder = out_dir or Path("arsched-runs") / cfg.name
    if dry_run:
        from arsched.experiments.sweep import read_rows

        done = {r["task_id"] for kind in {t.kind for t in tasks} for r in read_rows(folder, kind)}
        todo = [t for t in tasks if t.id not in done]
        for t in todo:
            out.print(f"{t.id}  {t.describe()}", highlight=False)
        out.print(f"{len(todo)} of {len(tasks)} tasks to run; results in {folder}")
        return
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / "config.yaml", config.read_text(encoding="utf-8"))  # for the report
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=out, transient=False) as bar:
        job = bar.add_task(f"{cfg.name} ({backend})", total=len(tasks))

        def progress(finished: int, total: int) -> None:
            if bar.tasks[job].completed == 0 and finished:  # the skipped ones do not count for the ETA
                bar.reset(job, total=total, completed=finished)
            bar.update(job, completed=finished)

        summary = sweep(tasks, folder, backend, workers, address, progress)
    out.print(
        f"{summary.done} run, {summary.skipped} already done, {len(summary.failures)} failed "
        f"of {summary.total} tasks; results in {folder}",
        highlight=False,
    )
    for task, error in summary.failures:
        out.print(f"[red]failed[/red] {task.id} {task.describe()}: {error}", highlight=False)
    if summary.failures:
        raise typer.Exit(1)


def report_cmd(
    folders: Annotated[
        list[Path], typer.Argument(help="Results folders written by arsched sweep.", show_default=False)
    ],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Folder for index.html.")] = Path("report"),
) -> None:
    """Write one self-contained HTML page (plots embedded, no network needed) from sweep results.

    Tables of the gap to the lower bound per topology and algorithm; plots of the gaps, of time
    against message size beside the bound, of round-model rounds beside the bound, and, when
    the folders hold cluster runs, JCT CDFs and GPU utilisation.
    """
    from arsched.experiments.report import write_report

    path = write_report(folders, out_dir)
    out.print(f"wrote {path}")


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.command("sweep")(sweep_cmd)
    app.command("report")(report_cmd)
