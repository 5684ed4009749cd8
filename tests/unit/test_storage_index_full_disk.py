"""An active index on a full file system: the next entry's page cannot be backed, and the write
must fail as an OSError (which takes the log directory offline) instead of killing the broker
with SIGBUS, as a sparse shared mapping would when it touches the unbacked page.

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

# Appends offset index entries until one fails; prints how the failure looked.
SCRIPT = """
import errno, os, sys
from odradek.broker.storage.index import OffsetIndex
d = sys.argv[1]
index = OffsetIndex(os.path.join(d, "00000000000000000000.index"), 0, 1 << 20, active=True)
ballast = os.open(os.path.join(d, "ballast"), os.O_WRONLY | os.O_CREAT)
while True:
    try:
        os.write(ballast, b"\\0" * 4096)
    except OSError:
        break
for i in range(1 << 17):
    try:
        index.append(i, i * 4096)
    except OSError as e:
        print("refused", errno.errorcode[e.errno], index.entries, flush=True)
        break
else:
    print("never refused", flush=True)
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
    # Entries already written stay: only the one that needed a new page was refused.
    assert int(words[2]) % (os.sysconf("SC_PAGE_SIZE") // 8) == 0
