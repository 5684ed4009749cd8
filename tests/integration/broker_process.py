"""One `odradek broker` process on loopback, as the integration tests run it.

The process can be stopped with SIGTERM (controlled shutdown), killed with SIGKILL, paused
(SIGSTOP), resumed and started again on the same port and directories. Every start writes its
own log file (broker-<n>.log), so a failure report can show what each incarnation said.

A broker may listen on another address than loopback and run under a wrapper command (the chaos
suite starts each broker inside its own network namespace with `ip netns exec`, with a fault
shim preloaded through `env`); `pdeathsig` makes the process die with the harness.
"""

from __future__ import annotations

import ctypes
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Self

import pytest
from odradek.broker.client.blocking import api_versions_probe

START_TIMEOUT = float(os.environ.get("ODRADEK_TEST_START_TIMEOUT", "60"))
STOP_TIMEOUT = 60.0  # a controlled shutdown moves leadership first; SIGKILL after this
LOG_TAIL_LINES = 200


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_EPHEMERAL_LOW = _ephemeral_low()
_handed_out: set[int] = set()


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """preexec_fn: the child gets `sig` when the harness dies, even by SIGKILL (the signal is
    kept across exec, so it reaches the process a wrapper such as `ip netns exec` runs)."""
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, sig, 0, 0, 0)


def free_port() -> int:
    """A free port below the kernel's ephemeral range, never handed out twice in this run.

    A port the kernel picked (bind to 0) is in the ephemeral range, so after the test kills the
    process listening there, any outgoing connection on the machine may take it as its local port
    and the restarted broker then fails with "Address already in use".
    """
    low = max(1024, _EPHEMERAL_LOW - 20000)
    for _ in range(1000):
        port = random.randrange(low, _EPHEMERAL_LOW)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port in {low}-{_EPHEMERAL_LOW - 1}")


class BrokerProcess:
    """`settings` become --override arguments after the listener and log directory, so they
    may replace those too (e.g. a SASL listener)."""

    def __init__(
        self,
        data_dir: Path,
        log_dir: Path,
        settings: dict[str, str],
        *,
        port: int | None = None,
        name: str = "odradek broker",
        host: str = "127.0.0.1",
        wrapper: list[str] | None = None,
        env: dict[str, str] | None = None,
        pdeathsig: bool = False,
    ) -> None:
        self.data_dir = data_dir
        self.log_dir = log_dir
        self.settings = settings
        self.host = host
        self.port = port or free_port()
        self.name = name
        self.wrapper = wrapper or []
        self.env = env or {}
        self.pdeathsig = pdeathsig
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        # Extra environment of the next start (e.g. ODRADEK_CRASH_AT for crash tests).
        self.env: dict[str, str] = {}

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        settings = {
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.data_dir),
            **self.settings,
        }
        cmd = [*self.wrapper, sys.executable, "-m", "odradek.broker.cli", "broker"]
        for key, value in settings.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def launch(self) -> None:
        """Start the process without waiting for it to serve."""
        assert not self.running, f"{self.name} already running"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        path = self.log_dir / f"broker-{self.starts}.log"
        self.starts += 1
        with open(path, "wb") as log:
            log.write(("$ " + " ".join(self.command()) + "\n").encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
                start_new_session=True,
                preexec_fn=die_with_parent if self.pdeathsig else None,
            )

    def wait_serving(self, timeout: float = START_TIMEOUT) -> None:
        """Wait until it answers ApiVersions; fail the test with its log if it exits or not."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            code = self.proc.poll()
            if code is not None:
                pytest.fail(
                    f"{self.name} exited with {code} before accepting requests\n{self.log_tail()}",
                    pytrace=False,
                )
            if api_versions_probe(self.host, self.port):
                return
            time.sleep(0.1)
        self.kill()
        pytest.fail(
            f"{self.name} did not answer ApiVersions within {timeout}s\n{self.log_tail()}",
            pytrace=False,
        )

    def start(self, timeout: float = START_TIMEOUT) -> Self:
        self.launch()
        self.wait_serving(timeout)
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM and wait for the exit (a controlled shutdown); SIGKILL after `timeout`."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a paused process would not see SIGTERM
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: a crash, no shutdown work at all."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def restart(self, *, kill: bool = False, timeout: float = START_TIMEOUT) -> Self:
        """Stop (or kill -9) and start again with the same port, data and settings."""
        if kill:
            self.kill()
        else:
            self.stop()
        return self.start(timeout)

    def log_text(self) -> str:
        parts = []
        for i in range(self.starts):
            path = self.log_dir / f"broker-{i}.log"
            if path.exists():
                parts.append(f"--- {path} ---\n" + path.read_text(errors="replace"))
        return "\n".join(parts)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])
