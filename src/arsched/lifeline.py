"""Worker processes that end with the process that started them.

A sweep's pool workers and the ranks of `arsched run` must not outlive their parent: a parent
killed with SIGKILL runs no clean-up, and its children would go on computing and holding
memory, ports and multiprocessing's resource tracker for minutes. `die_with_parent`, called
first thing in the child, starts a daemon thread that ends the child as soon as its parent is
gone (the child is then re-parented, so `os.getppid()` changes). Polling works on every POSIX
system and whichever thread started the child; Linux's PR_SET_PDEATHSIG fires when the
spawning *thread* exits, which for a pool's helper threads is not the parent's death.
"""

from __future__ import annotations

import os
import threading
import time

POLL_S = 0.2


def die_with_parent(parent_pid: int, poll_s: float = POLL_S) -> None:
    """End this process (exit code 1, no clean-up) within `poll_s` of `parent_pid` ending; at
    once if it has ended already. Call it with the parent's pid, taken in the parent."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(poll_s)
        os._exit(1)

    threading.Thread(target=watch, name="arsched-lifeline", daemon=True).start()
