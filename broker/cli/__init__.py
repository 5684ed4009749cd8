"""The `odradek` command: run a broker, manage topics, produce and consume from a terminal.

    odradek broker [--config FILE] [--override key=value ...]
    odradek topics create|list|describe|alter|delete ...
    odradek produce --topic T [--value V ...]     (otherwise one record per stdin line)
    odradek consume --topic T [--from-beginning] [--max-messages N] [--timeout S]
    odradek groups list|describe|delete ...
    odradek transactions list|describe ...        (transactional ids and their state)
    odradek log-dirs describe [--broker N ...] [--topic T ...]
    odradek log-dirs move --topic T --partition P --broker N --dir PATH
    odradek ready [--broker-id N]                 (exit 0 when the broker serves the cluster)
    odradek wait-drained [--broker-id N]          (a preStop hook: wait while N is drained)
    odradek kafka-tool NAME [ARGS ...]            (Apache Kafka's own tools, e.g. kafka-topics.sh)

Client commands talk to --bootstrap-server (default 127.0.0.1:9092). A failure prints one line
starting with "error:" on stderr and exits with status 1. Each command group has its module
here: its sub-command parsers (`add_parsers`) and its handlers (`COMMANDS`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Sequence

from ..protocol.errors import KafkaError
from . import groups, log_dirs, probes, records, topics, transactions
from .common import CliError, Commands

COMMANDS: Commands = {
    **topics.COMMANDS,
    **groups.COMMANDS,
    **transactions.COMMANDS,
    **log_dirs.COMMANDS,
    **records.COMMANDS,
    **probes.COMMANDS,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="odradek", description="Odradek: a Kafka-compatible broker and its tools."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("broker", help="run a broker", description="Run one broker.")
    p.add_argument("--config", metavar="FILE", help="server.properties-style config file")
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a config property (repeatable; wins over --config)",
    )
    for group in (topics, groups, transactions, log_dirs, probes):
        group.add_parsers(sub)
    sub.add_parser(
        "kafka-tool",
        help="run one of Apache Kafka's tools (kafka-topics.sh, ...): kafka-tool --help",
        add_help=False,
    )
    records.add_parsers(sub)
    return parser


def run_broker_command(args: argparse.Namespace) -> int:
    # Imported here: the client commands must work without the server's dependencies loaded.
    from odradek.broker.server.main import run_broker

    result = run_broker(args.config, list(args.override))
    return result if isinstance(result, int) else 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["kafka-tool"]:
        # Everything after the tool's name is the tool's own: no parsing here.
        from ..kafka_tools import main as kafka_tool

        return kafka_tool(argv[1:])
    args = build_parser().parse_args(argv)
    if args.command == "broker":
        return run_broker_command(args)
    handler = COMMANDS[(args.command, getattr(args, "action", None))]
    try:
        return asyncio.run(handler(args, sys.stdout))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): not an error; keep Python from complaining.
        with contextlib.suppress(OSError):
            sys.stdout = open("/dev/null", "w")  # noqa: SIM115
        return 0
    except (KafkaError, CliError, ValueError, OSError) as e:
        sys.stderr.write(f"error: {_describe_error(e)}\n")
        return 1


def _describe_error(e: BaseException) -> str:
    if isinstance(e, KafkaError):
        return f"{e.code.name}: {e.message}" if e.message else e.code.name
    return str(e) or type(e).__name__
