"""An active index on a full file system: writing its entries to the file cannot get blocks,
and the flush must fail as an OSError (which takes the log directory offline) instead of killing
the broker, and keep the entries so a later flush, once there is room, writes them all.

A real tmpfs of 256 KiB, mounted for the test (CI runs as root), filled to the last byte.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")

# Appends offset index entries (kept in memory), flushes them on the full disk, then again once
# the ballast is gone; prints how it went.
SCRIPT = """
import errno, os, sys
from odradek.broker.storage.index import OffsetIndex
d = sys.argv[1]
path = os.path.join(d, "00000000000000000000.index")
index = OffsetIndex(path, 0, 1 << 20, active=True)
ballast = os.path.join(d, "ballast")
fd = os.open(ballast, os.O_WRONLY | os.O_CREAT)
while True:
    try:
        os.write(fd, b"\\0" * 4096)
    except OSError:
        break
os.close(fd)
for i in range(4096):
    index.append(i, i * 4096)
try:
    index.flush()
    print("never refused", flush=True)
except OSError as e:
    print("refused", errno.errorcode[e.errno], index.entries, flush=True)
os.unlink(ballast)
index.flush()
index.close()
print("written", os.path.getsize(path) // 8, *OffsetIndex(path, 0, 0, active=False).last_entry())
"""


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_an_index_entry_on_a_full_disk_is_an_io_error_not_a_crash(small_tmpfs: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(small_tmpfs)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, f"index writer died with {proc.returncode}: {proc.stderr}"
    words = proc.stdout.split()
    assert words[:2] == ["refused", "ENOSPC"], proc.stdout
    # The refused entries stay in memory, and reach the file once there is room.
    assert words[2] == "4096"
    assert words[3:] == ["written", "4096", "4095", str(4095 * 4096)], proc.stdout
