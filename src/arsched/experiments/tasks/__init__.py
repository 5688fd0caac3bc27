"""Task kinds: how a config block becomes tasks, and how one task becomes one result row.

`base` holds what every kind is made of, `algorithm`, `cluster` and `rl` one kind each, and
`registry` the kinds a config can name.
"""

from arsched.experiments.tasks.base import Kind, Task
from arsched.experiments.tasks.registry import KINDS, TIMING_COLUMNS, execute, expand

__all__ = ["KINDS", "TIMING_COLUMNS", "Kind", "Task", "execute", "expand"]
