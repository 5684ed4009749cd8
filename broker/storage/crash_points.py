"""Named crash points, so tests can kill a broker at an exact step of a multi-step disk change.

`ODRADEK_CRASH_AT=<name>` in a broker's environment makes `crash_point(<name>)` kill the broker
with SIGKILL there: what `kill -9` at the worst moment does, made repeatable. Points in a helper
process (the cleaner's worker) kill the broker first, then the helper. Unset, a crash point is
one dictionary lookup.
"""

from __future__ import annotations

import logging
import os
import signal

ENV = "ODRADEK_CRASH_AT"

log = logging.getLogger(__name__)

# The broker's pid when the caller is one of its helper processes.
_broker_pid: int | None = None


def set_broker_pid(pid: int) -> None:
    """Called by a helper process: crash points there kill this broker too."""
    global _broker_pid
    _broker_pid = pid


def crash_point(name: str) -> None:
    if os.environ.get(ENV) != name:
        return
    log.warning("crash point %s reached: killing the broker", name)
    for handler in logging.getLogger().handlers:
        handler.flush()
    if _broker_pid is not None:
        os.kill(_broker_pid, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
