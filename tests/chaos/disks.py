"""Small tmpfs log directories that a fault can fill to the last byte and give back.

Each broker of a chaos run keeps its log directory on its own tmpfs (sized for a run's data),
so "disk full" is real ENOSPC from the kernel: the fault fills the free space with a ballast
file and heals by deleting it. The mounts live in the harness's private mount namespace
(runner.py), so they vanish with it even when it is killed.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

BALLAST = ".chaos-ballast"


class Tmpfs:
    def __init__(self, path: Path, size_mb: int) -> None:
        self.path = path
        self.size_mb = size_mb
        self.mounted = False

    def mount(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m,mode=0755", "tmpfs",
             str(self.path)],
            check=True,
            capture_output=True,
        )  # fmt: skip
        self.mounted = True

    def umount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], check=False, capture_output=True)
            self.mounted = False

    def free_bytes(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def fill(self) -> int:
        """Take every free byte; returns how many were taken."""
        taken = 0
        fd = os.open(self.path / BALLAST, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            free = self.free_bytes()
            if free:
                with contextlib.suppress(OSError):
                    os.posix_fallocate(fd, os.fstat(fd).st_size, free)
            chunk = b"\0" * 65536
            while True:  # what fallocate could not take, in ever smaller writes
                try:
                    os.write(fd, chunk)
                except OSError:
                    if len(chunk) == 1:
                        break
                    chunk = chunk[: len(chunk) // 2]
            taken = os.fstat(fd).st_size
        finally:
            os.close(fd)
        return taken

    def release(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.path / BALLAST).unlink()
