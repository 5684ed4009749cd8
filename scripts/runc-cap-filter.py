"""An OCI runtime in front of runc that asks only for the capabilities this machine can grant.

`docker run --privileged` (which kind's nodes need) requests every capability Docker knows. On a
machine whose capability bounding set lacks one of them (CAP_SYS_RESOURCE on the project's build
machines), runc fails with "unable to apply caps". Registered as Docker's default runtime
(scripts/install-docker.sh does that where it is needed), this wrapper removes every capability
outside its own bounding set from the container's OCI spec, then hands over to the real runc:

- `create` and `run` read the spec from <bundle>/config.json (`--bundle`/`-b`, default: the
  working directory);
- `exec` reads the process from the `--process`/`-p` file (that is how Docker and containerd
  call it).

Every other command, and everything else in the spec, passes through unchanged. Standard library
only: the wrapper runs under the host's python3 for each call Docker makes.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

# Linux capability numbers (linux/capability.h), as the OCI spec names them.
CAPABILITIES = (
    "CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP LINUX_IMMUTABLE "
    "NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE SYS_RAWIO "
    "SYS_CHROOT SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME "
    "SYS_TTY_CONFIG MKNOD LEASE AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG "
    "WAKE_ALARM BLOCK_SUSPEND AUDIT_READ PERFMON BPF CHECKPOINT_RESTORE"
).split()

# runc's global options that take a value (`runc --root DIR create ...`).
GLOBAL_VALUE_OPTIONS = {"--root", "--log", "--log-format", "--criu", "--rootless"}

REAL_RUNC_CANDIDATES = ("/usr/sbin/runc", "/usr/bin/runc", "/usr/local/sbin/runc")


def missing_capabilities(status_path: str = "/proc/self/status") -> set[str]:
    """Names (CAP_*) of the known capabilities outside this process's bounding set."""
    with open(status_path) as status:
        for line in status:
            if line.startswith("CapBnd:"):
                bounding = int(line.split()[1], 16)
                break
        else:
            return set()
    return {f"CAP_{name}" for bit, name in enumerate(CAPABILITIES) if not bounding >> bit & 1}


def split_command(argv: list[str]) -> tuple[int, str | None]:
    """Index and name of runc's subcommand in argv (global options come first)."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in GLOBAL_VALUE_OPTIONS:
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        return i, arg
    return len(argv), None


def option_value(args: list[str], long: str, short: str) -> str | None:
    """The value of `--long V`, `--long=V`, `-s V` or `-s=V` among a subcommand's arguments."""
    for i, arg in enumerate(args):
        for name in (long, short):
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(name + "="):
                return arg[len(name) + 1 :]
    return None


def drop_capabilities(process: dict, missing: set[str]) -> bool:
    """Remove the missing capabilities from an OCI process object; True when it changed."""
    changed = False
    for kind, names in (process.get("capabilities") or {}).items():
        if isinstance(names, list):
            kept = [n for n in names if n not in missing]
            if len(kept) != len(names):
                process["capabilities"][kind] = kept
                changed = True
    return changed


def filter_file(path: str, missing: set[str], *, whole_spec: bool) -> None:
    """Rewrite a spec (config.json) or process file in place when it asks for missing caps."""
    with open(path) as f:
        doc = json.load(f)
    process = doc.get("process") if whole_spec else doc
    if isinstance(process, dict) and drop_capabilities(process, missing):
        with open(path, "w") as f:
            json.dump(doc, f)


def real_runc() -> str:
    for candidate in REAL_RUNC_CANDIDATES:
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("runc")
    if not found or os.path.realpath(found) == os.path.realpath(sys.argv[0]):
        sys.exit("runc-cap-filter: no runc found")
    return found


def main(argv: list[str]) -> None:
    index, command = split_command(argv)
    missing = missing_capabilities()
    if missing and command in ("create", "run", "exec"):
        sub = argv[index + 1 :]
        if command == "exec":
            process = option_value(sub, "--process", "-p")
            if process:
                filter_file(process, missing, whole_spec=False)
        else:
            bundle = option_value(sub, "--bundle", "-b") or "."
            filter_file(os.path.join(bundle, "config.json"), missing, whole_spec=True)
    runc = real_runc()
    os.execv(runc, [runc, *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
