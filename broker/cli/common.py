"""What every command group of the CLI uses: argument types, the client options, the admin
client they configure, the usage error and the table printer."""

from __future__ import annotations

import argparse
import os
from collections.abc import Awaitable, Callable
from typing import TextIO

from ..client.admin import AdminClient, OffsetSpec
from ..client.cluster import ConnectionOptions
from ..client.producer import parse_acks
from ..client.security import ClientSecurity

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

# A command: parsed arguments and where to print -> exit status.
Command = Callable[[argparse.Namespace, TextIO], Awaitable[int]]
Commands = dict[tuple[str, str | None], Command]
Subparsers = argparse._SubParsersAction


class CliError(Exception):
    """A usage problem found after argument parsing (exits 1 with the message)."""


# -- argument types ---------------------------------------------------------------------------


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), value


def positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return n


def env_int(name: str) -> int | None:
    value = os.environ.get(name, "").strip()
    return int(value) if value.lstrip("-").isdigit() else None


def seconds(text: str) -> float:
    try:
        s = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if s < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return s


def acks(text: str) -> int:
    try:
        return parse_acks(text)
    except ValueError:
        raise argparse.ArgumentTypeError("acks must be 0, 1, -1 or all") from None


def offset(text: str) -> int:
    lowered = text.strip().lower()
    if lowered == "earliest":
        return OffsetSpec.EARLIEST
    if lowered == "latest":
        return OffsetSpec.LATEST
    try:
        n = int(lowered)
    except ValueError:
        raise argparse.ArgumentTypeError("offset must be a number, earliest or latest") from None
    if n < 0:
        raise argparse.ArgumentTypeError("offset must not be negative")
    return n


def unescape(text: str) -> str:
    """Separators typed on a command line: "\\t" and "\\n" mean tab and newline."""
    return text.replace("\\t", "\t").replace("\\n", "\n")


def seconds_option(p: argparse.ArgumentParser, flag: str, default: float | None, help: str) -> None:
    """A --flag SECONDS option (non-negative)."""
    p.add_argument(flag, type=seconds, default=default, metavar="SECONDS", help=help)


# -- client options ---------------------------------------------------------------------------


def client_parser(sub: Subparsers, name: str, **kwargs: str) -> argparse.ArgumentParser:
    """A sub-command that talks to the cluster: it takes the client options."""
    p = sub.add_parser(name, **kwargs)
    p.add_argument(
        "--bootstrap-server",
        default=DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT[,...]",
        help=f"brokers to connect to first (default {DEFAULT_BOOTSTRAP})",
    )
    seconds_option(
        p,
        "--request-timeout",
        30.0,
        "how long to wait for the cluster, retries included (default 30)",
    )
    p.add_argument(
        "--command-config",
        metavar="FILE",
        help="client properties: security.protocol, sasl.mechanism, sasl.username, "
        "sasl.password (or sasl.jaas.config), ssl.ca.location, ssl.certificate.location, "
        "ssl.key.location",
    )
    return p


def security(args: argparse.Namespace) -> ClientSecurity | None:
    return ClientSecurity.from_file(args.command_config) if args.command_config else None


def connection(args: argparse.Namespace) -> ConnectionOptions:
    """How every client of the CLI reaches the cluster (the options of client_parser)."""
    return {
        "client_id": "odradek-cli",
        "request_timeout": args.request_timeout,
        "security": security(args),
    }


def admin_client(args: argparse.Namespace) -> AdminClient:
    return AdminClient(
        args.bootstrap_server,
        operation_timeout=args.request_timeout,
        retry_timeout=args.request_timeout,
        **connection(args),
    )


def table(rows: list[tuple[str, ...]], out: TextIO) -> None:
    """Rows as left-aligned columns two spaces apart (the first row is the heading)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        out.write("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() + "\n")
