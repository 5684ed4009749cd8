"""The LD_PRELOAD fault shim (fault_shim.c): built once with gcc, driven through a control file.

Each broker of a chaos run gets its own control file; the harness writes a wall-clock offset
(a clock step) or arms EIO for writes and fsyncs under the broker's log directory, and the shim
in the running broker reads the fields on every call (the file is mapped shared).

Why not libfaketime: Debian's libfaketime 0.9.10 with DONT_FAKE_MONOTONIC=1 (needed so that
only the wall clock steps) makes Python 3.11's time.sleep fail with EINVAL (its
clock_nanosleep wrapper), and kazoo sleeps between retries. A time namespace shifts only the
monotonic and boot clocks, which a running process never sees step.
"""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
from pathlib import Path

SOURCE = Path(__file__).with_name("fault_shim.c")
CACHE = Path(os.environ.get("ODRADEK_CACHE", Path.home() / ".cache" / "odradek")) / "chaos"
CONTROL_SIZE = 4096
FAIL_WRITE = 1
FAIL_FSYNC = 2
_HEADER = struct.Struct("=qii")  # clock_offset_ns, io_faults, prefix_len


def build() -> Path:
    """The compiled shim, rebuilt when its source changes."""
    source = SOURCE.read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:12]
    lib = CACHE / f"fault_shim-{digest}.so"
    if not lib.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = lib.with_suffix(f".{os.getpid()}.tmp")
        cmd = ["gcc", "-O2", "-shared", "-fPIC", "-Wall", "-Werror", "-o", str(tmp), str(SOURCE),
               "-ldl"]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"gcc could not build the fault shim:\n{proc.stderr}")
        tmp.replace(lib)
    return lib


class Control:
    """One process's control file."""

    def __init__(self, path: Path, prefix: Path) -> None:
        self.path = path
        self.prefix = str(prefix).encode()
        self.clock_offset_s = 0.0
        self.io_faults = 0
        path.write_bytes(bytes(CONTROL_SIZE))
        self._write()

    def env(self, lib: Path) -> dict[str, str]:
        return {"LD_PRELOAD": str(lib), "ODRADEK_CHAOS_CONTROL": str(self.path)}

    def set_clock_offset(self, seconds: float) -> None:
        self.clock_offset_s = seconds
        self._write()

    def set_io_faults(self, faults: int) -> None:
        self.io_faults = faults
        self._write()

    def reset(self) -> None:
        self.clock_offset_s = 0.0
        self.io_faults = 0
        self._write()

    def _write(self) -> None:
        data = _HEADER.pack(int(self.clock_offset_s * 1e9), self.io_faults, len(self.prefix))
        fd = os.open(self.path, os.O_WRONLY)
        try:
            os.pwrite(fd, self.prefix, _HEADER.size)
            os.pwrite(fd, data, 0)
        finally:
            os.close(fd)
