"""The kernel settings a bench run changes for its length (root only), and how they go back.

The values to put back wait in a journal file until they are put back: a harness killed with
SIGKILL (no `finally` runs) leaves the machine's settings changed, and the next run restores
them before anything else. The journal names the boot it was written in, so a reboot (which
resets the settings itself) discards it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path

JOURNAL = Path(tempfile.gettempdir()) / "odradek-bench-kernel-settings.json"
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
VM = Path("/proc/sys/vm")

# Dirty page cache the kernel may hold before it writes back (percent of available memory).
# With its defaults (10 and 20) a 4 s produce phase of 10 KiB records (3-4 GB) crossed the
# background threshold (2.2 GB here) and ran while the disk wrote (Odradek's row 81,500 to
# 92,300 records/s, 90,400 to 95,100 with these). Higher thresholds keep every phase in memory;
# the harness syncs between phases (scenarios.write_back).
WRITEBACK = {"dirty_background_ratio": "40", "dirty_ratio": "60"}

# Free page reporting (virtio-balloon; this machine's kernel has it on, order 9): the guest hands
# free 2 MiB blocks back to the host, and a page cache grown over them again faults each page
# in at the host. Writing 1,600 MB into a fresh file read 4,600 MB/s or 2,000-2,400 MB/s from one
# fill to the next with it on, 4,650-4,800 MB/s every time with it off (see bench/README.md).
PAGE_REPORTING_ORDER = Path("/sys/module/page_reporting/parameters/page_reporting_order")

# Turning reporting off does not give back what was reported before the run: each such page
# faults in at the host the first time the run touches it. Filling 3,000 MB into a fresh file
# right after turning it off read 310 and 575 MB/s, then 3,300-4,200 MB/s once those pages had
# been touched; in stop 37's runs both systems' produce rows rose repeat after repeat (Odradek's
# 10 KiB 64,000 to 90,000 records/s) as the run reached memory it had not touched yet. So the
# run touches its free memory first (MAP_POPULATE, a process per core: 21.7 GB in 16 to 26 s
# here), keeping this much of it untouched for the kernel's own needs.
UNTOUCHED_BYTES = 1 << 30
_POPULATE = (
    "import mmap, sys; "
    "mmap.mmap(-1, int(sys.argv[1]), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS "
    "| mmap.MAP_POPULATE).close()"
)


def _boot() -> str:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return ""


def _journal() -> dict[str, str]:
    """Setting file -> value to put back, as this boot's runs left them."""
    try:
        kept = json.loads(JOURNAL.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(kept, dict) or kept.get("boot") != _boot():
        return {}
    return dict(kept.get("restore", {}))


def _keep(restore: dict[str, str]) -> None:
    """Write the journal: what still waits to be put back (none: the file goes)."""
    if not restore:
        JOURNAL.unlink(missing_ok=True)
        return
    JOURNAL.write_text(json.dumps({"boot": _boot(), "restore": restore}, indent=1))


def _forget(restore: dict[str, str]) -> None:
    _keep({k: v for k, v in _journal().items() if k not in restore})


def _put_back(restore: dict[str, str]) -> None:
    """Write the values back, then drop them from the journal."""
    for path, value in restore.items():
        Path(path).write_text(value)
    _forget(restore)


def restore_left_behind() -> None:
    """Put back what a killed run left changed (said when there was any)."""
    left = _journal()
    if not left:
        return
    try:
        _put_back(left)
    except OSError as exc:
        print(f"bench: could not put back the kernel settings a killed run left ({JOURNAL}): "
              f"{exc.strerror}", flush=True)  # fmt: skip
        return
    settings = ", ".join(f"{Path(p).name}={v}" for p, v in left.items())
    print(f"bench: a run killed before its end had left kernel settings changed; put back "
          f"{settings}", flush=True)  # fmt: skip


@contextmanager
def _held(changes: dict[Path, str], restore: dict[Path, str]) -> Iterator[None]:
    """`changes` written for the block and `restore` after it, journalled before the first
    change; OSError (not root) when the first change cannot be written."""
    back = {str(p): v for p, v in restore.items()}
    _keep({**_journal(), **back})
    written = 0
    try:
        for path, value in changes.items():
            path.write_text(value)
            written += 1
    except OSError:
        if written:
            _put_back(back)
        else:
            _forget(back)
        raise
    try:
        yield
    finally:
        _put_back(back)


@contextmanager
def _setting_held(
    meta: dict, setting: str, plan: Callable[[], tuple[dict[Path, str], dict[Path, str], str]],
    consequence: str,
) -> Iterator[None]:  # fmt: skip
    """One setting changed for the block (root only). `plan` reads the kernel's values and
    returns (changes, what to put back, how meta[setting] describes the run's value); a
    setting this kernel lacks, or cannot be changed (not root), is said and left as it is."""
    stack = ExitStack()
    try:
        changes, restore, described = plan()
        stack.enter_context(_held(changes, restore))
    except FileNotFoundError:
        meta[setting] = "not in this kernel"
        yield
        return
    except OSError as exc:
        meta[setting] = f"the kernel's (not changed: {exc.strerror})"
        print(f"bench: {setting.replace('_', ' ')} stays the kernel's ({exc.strerror}); "
              f"{consequence}", flush=True)  # fmt: skip
        yield
        return
    meta[setting] = described
    with stack:
        yield


def writeback_held(meta: dict) -> AbstractContextManager[None]:
    """WRITEBACK for the run (root only), the kernel's own settings back afterwards."""

    def plan() -> tuple[dict[Path, str], dict[Path, str], str]:
        names = [*WRITEBACK, "dirty_background_bytes", "dirty_bytes"]
        before = {n: (VM / n).read_text().strip() for n in names}
        restore = {}
        for name in ("dirty_background", "dirty"):  # a ratio, or bytes when those were set
            chosen = f"{name}_bytes" if before[f"{name}_bytes"] != "0" else f"{name}_ratio"
            restore[VM / chosen] = before[chosen]
        changes = {VM / k: v for k, v in WRITEBACK.items()}
        return changes, restore, ", ".join(f"vm.{k}={v}" for k, v in WRITEBACK.items())

    return _setting_held(meta, "writeback", plan, "rows writing gigabytes will move with the disk")


def _orders() -> int:
    """How many block orders the allocator keeps: a reporting order this high reports none."""
    # /proc/buddyinfo: "Node 0, zone Normal" then one count per order, 0 to the largest.
    return len(Path("/proc/buddyinfo").read_text().splitlines()[0].split()) - 4


def page_reporting_held(meta: dict) -> AbstractContextManager[None]:
    """No free page reporting during the run (root only, where the kernel has it): its order is
    set above the largest block the allocator keeps, and the kernel's own order is put back."""

    def plan() -> tuple[dict[Path, str], dict[Path, str], str]:
        before = PAGE_REPORTING_ORDER.read_text().strip()
        orders = _orders()
        described = f"off (page_reporting_order={orders}; the kernel's: {before})"
        return {PAGE_REPORTING_ORDER: str(orders)}, {PAGE_REPORTING_ORDER: before}, described

    return _setting_held(meta, "page_reporting", plan,
                         "rows writing gigabytes will move with the host's page faults")  # fmt: skip


# DAMON (this machine's kernel runs one kdamond, started at boot: physical address space, page
# out every region not accessed for 12 aggregation intervals of 5 s, up to 128 MB a second):
# the page cache of a file read, then left for a minute or two, goes. A 2,000 MB file read
# once and left alone with a core busy kept 1.9 GB of its pages after 20 s and 1.7 GB after
# 3 minutes, so a consume row's topic, read once a repeat (every two minutes or so), is read
# partly from the disk (about 300 MB/s here against 11,000 MB/s from the cache) in some
# repeats and not in others, on either system. Stopped for the run, started again after.
DAMON_ADMIN = Path("/sys/kernel/mm/damon/admin/kdamonds")


def damon_held(meta: dict) -> AbstractContextManager[None]:
    """Every running kdamond stopped for the run (root only, where the kernel has DAMON), and
    started again after it with the settings it had."""

    def plan() -> tuple[dict[Path, str], dict[Path, str], str]:
        if not DAMON_ADMIN.is_dir():
            raise FileNotFoundError(DAMON_ADMIN)
        states = sorted(DAMON_ADMIN.glob("*/state"))
        running = [p for p in states if p.read_text().strip() == "on"]
        if not running:
            return {}, {}, "none running"
        names = ", ".join(f"kdamond.{p.parent.name}" for p in running)
        return ({p: "off" for p in running}, {p: "on" for p in running},
                f"stopped for the run ({names})")  # fmt: skip

    return _setting_held(meta, "damon", plan,
                         "rows reading a topic again will move with the pages it reclaims")  # fmt: skip


def reporting_off() -> bool:
    """Whether free page reporting is off now (its order above the largest block)."""
    try:
        order = int(PAGE_REPORTING_ORDER.read_text())
    except (OSError, ValueError):
        return False
    return order >= _orders()


def free_memory_bytes() -> int:
    """MemFree of /proc/meminfo."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemFree:"):
            return int(line.split()[1]) * 1024
    return 0


def fault_in_free_memory(meta: dict) -> None:
    """Touch the free memory once, with reporting off, so that no phase of the run meets a page
    the host took back (see UNTOUCHED_BYTES); said in meta["memory_touched"]."""
    if not reporting_off():
        meta["memory_touched"] = "no (free page reporting is on or absent)"
        return
    wanted = free_memory_bytes() - UNTOUCHED_BYTES
    if wanted <= 0:
        meta["memory_touched"] = "no (less than 1 GiB free)"
        return
    workers = os.cpu_count() or 1
    began = time.monotonic()
    procs = [
        subprocess.Popen([sys.executable, "-c", _POPULATE, str(wanted // workers)])
        for _ in range(workers)
    ]
    failed = sum(p.wait() != 0 for p in procs)
    took = time.monotonic() - began
    failures = f" ({failed} workers failed)" if failed else ""
    meta["memory_touched"] = f"{wanted / 1e9:.1f} GB in {took:.0f} s{failures}"
    print(f"bench: touched {meta['memory_touched']} of free memory (see "
          f"kernel_settings.UNTOUCHED_BYTES)", flush=True)  # fmt: skip
