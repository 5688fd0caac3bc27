"""Experiments at scale: YAML configs expanded into idempotent tasks, sweeps on a local process
pool or on Ray with results appended as they finish, and a self-contained HTML report."""

from arsched.experiments.config import Config, ConfigError, load_config, parse_config
from arsched.experiments.sweep import SweepSummary, read_rows, sweep
from arsched.experiments.tasks import KINDS, Task, expand

__all__ = [
    "KINDS",
    "Config",
    "ConfigError",
    "SweepSummary",
    "Task",
    "expand",
    "load_config",
    "parse_config",
    "read_rows",
    "sweep",
]
