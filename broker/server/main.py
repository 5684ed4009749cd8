"""The broker process: configuration, event loop, signals, clean shutdown."""

from __future__ import annotations

import asyncio
import logging
import resource
import signal
import sys

from ..cluster.embedded_store import StoreLockedError
from ..config import BrokerConfig, ConfigError, load_config
from ..storage.errors import LogDirError
from .broker import Broker
from .network import ListenError
from .tls import TlsConfigError

log = logging.getLogger("odradek")

# What stops a broker before it serves, told in one line (no traceback): its address is taken,
# a data directory cannot be used, or another broker holds it.
START_FAILURES = (ListenError, LogDirError, StoreLockedError)


def _configure_logging() -> None:
    logging.basicConfig(
        level=logging.INFO,
        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def raise_open_files_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit, as the JVM does (-XX:+MaxFDLimit): every
    partition keeps its active segment open, so thousands of partitions need more descriptors
    than the usual soft limit of 1,024. Returns the soft limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard and hard != resource.RLIM_INFINITY:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as e:
            log.warning("cannot raise the open files limit from %d to %d: %s", soft, hard, e)
        else:
            soft = hard
    log.info("open files limit: %s (hard limit %s)", _limit(soft), _limit(hard))
    return soft


def _limit(value: int) -> str:
    return "unlimited" if value == resource.RLIM_INFINITY else str(value)


async def _serve(config: BrokerConfig) -> None:
    broker = Broker(config)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await broker.start()
    except BaseException:
        await broker.stop()  # let go of what did start: threads, locks, sockets
        raise
    try:
        await stop.wait()
    finally:
        # A second SIGTERM (a supervisor repeating itself) must not cut the controlled shutdown
        # short, as in Kafka; SIGKILL still does, and a second Ctrl-C still interrupts.
        loop.remove_signal_handler(signal.SIGTERM)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        log.info("shutting down")
        await broker.stop()


def run_broker(config_path: str | None, overrides: list[str]) -> int:
    """Run one broker until SIGTERM/SIGINT; returns the process exit status."""
    _configure_logging()
    raise_open_files_limit()
    try:
        config = load_config(config_path, overrides)
    except ConfigError as e:
        log.error("invalid configuration: %s", e)
        return 2
    except OSError as e:
        log.error("cannot read configuration %s: %s", config_path, e)
        return 2
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        runner = asyncio.run
    else:
        runner = uvloop.run
    try:
        runner(_serve(config))
    except KeyboardInterrupt:
        pass
    except (ConfigError, TlsConfigError) as e:
        # Settings only checked when the broker is built (TLS stores, the inter-broker login).
        log.error("invalid configuration: %s", e)
        return 2
    except START_FAILURES as e:
        log.error("%s", e)
        return 1
    return 0
