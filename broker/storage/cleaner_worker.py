"""A cleaner thread's worker process: `python -m odradek.broker.storage.cleaner_worker`.

It reads pickles from stdin and answers on stdout. First its settings (offset map memory, load
factor, I/O buffer size, I/O rate, the broker's pid); then, per round, ("clean", CleanTask).
For each cleaned group it asks ("swap", base, replaced bases) and waits for True/False, and ends
the round with ("done", next dirty offset, CleanerStats), ("aborted", why) or ("error",
traceback). It exits when stdin closes, and the kernel kills it when the broker dies.
"""

from __future__ import annotations

import logging
import os
import pickle
import sys
import traceback
from typing import Any, BinaryIO

from .cleaner import Cleaner, CleaningAborted, OffsetMap, Throttler, die_with
from .crash_points import set_broker_pid

WORKER_NICENESS = 10


def main() -> None:
    inp: BinaryIO = sys.stdin.buffer
    out: BinaryIO = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but answers on the pipe
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="[%(asctime)s] %(levelname)s %(name)s (cleaner worker): %(message)s",
    )
    settings = pickle.load(inp)
    die_with(settings["broker_pid"])
    # Below the broker in CPU priority: on a busy machine produce and fetch go first.
    os.nice(WORKER_NICENESS)
    set_broker_pid(settings["broker_pid"])
    cleaner = Cleaner(
        OffsetMap(settings["memory"], settings["load_factor"]),
        settings["io_buffer_size"],
        Throttler(settings["rate"]),
        two_cores=True,
    )

    def send(msg: Any) -> None:
        pickle.dump(msg, out)
        out.flush()

    def swap(base: int, old: list[int]) -> bool:
        send(("swap", base, old))
        return bool(pickle.load(inp))

    while True:
        try:
            _, task = pickle.load(inp)
        except EOFError:
            return
        try:
            end, stats = cleaner.clean(task, swap)
        except CleaningAborted as exc:
            send(("aborted", str(exc)))
        except Exception:
            send(("error", traceback.format_exc()))
        else:
            send(("done", end, stats))


if __name__ == "__main__":
    main()
