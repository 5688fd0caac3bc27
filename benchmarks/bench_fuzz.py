"""A long fuzz campaign on hostile schedule files, outside CI: the property test of
tests/hostile/test_hostile_fuzz.py (a valid schedule with up to three fields replaced by extreme
or mistyped values; `validate` and `simulate` must end with exit 0, 1 or 2, exit 2 with one line
and no traceback, and write nothing) run with many seeded random examples instead of CI's 60
derandomised ones.

Usage: python benchmarks/bench_fuzz.py [--examples N] [--seed S]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _table import markdown, publish

ROOT = Path(__file__).resolve().parent.parent
TEST = "tests/hostile/test_hostile_fuzz.py::test_mutated_schedule_keeps_the_contract"


def main(examples: int = 2000, seed: int = 1) -> None:
    env = {**os.environ, "ARSCHED_FUZZ_EXAMPLES": str(examples), "ARSCHED_FUZZ_SEED": str(seed)}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", TEST, f"--hypothesis-seed={seed}"]
    argv.append("--hypothesis-show-statistics")
    t0 = time.perf_counter()
    run = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    result = "passed" if run.returncode == 0 else f"FAILED (pytest exit {run.returncode})"
    ran = re.search(r"(\d+) passing, (\d+) failing", run.stdout)
    done = int(ran.group(1)) + int(ran.group(2)) if ran else 0
    if run.returncode != 0:
        sys.stderr.write(run.stdout[-4000:])
    publish(
        "Hostile-input fuzz campaign",
        "The schedule-file property test of `tests/hostile/test_hostile_fuzz.py` run with seeded "
        "random examples (CI runs 60 derandomised ones): each example replaces up to three fields "
        "of a valid schedule with extreme or mistyped values and runs `arsched validate` and "
        "`arsched simulate --json` on it; every run must end with exit 0, 1 or 2 (2: one line on "
        "stderr, no traceback, no warning) and write nothing. Produced by "
        "`benchmarks/bench_fuzz.py`.",
        markdown(
            ["examples", "seed", "commands run", "wall time", "result"],
            [[done, seed, 2 * done, f"{seconds:.0f} s", result]],
        ),
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    main(args.examples, args.seed)
