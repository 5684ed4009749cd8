"""Kafka's small text files: offset checkpoints, leader-epoch checkpoint, partition.metadata,
meta.properties and the clean-shutdown marker.

Every write goes to `<name>.tmp`, is fsynced, renamed over the target and the directory fsynced,
so a crash leaves either the old or the new content, never a torn file.
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

CHECKPOINT_VERSION = 0


class CheckpointError(ValueError):
    """A checkpoint file exists but is not in Kafka's format."""


def fsync_path(path: Path | str, *, missing_ok: bool = False, flags: int = os.O_RDONLY) -> None:
    """fsync a file (or, with O_DIRECTORY in `flags`, a directory) known only by its path.

    `missing_ok` skips a path deleted or renamed since it was written: nothing of it to keep.
    Any other OSError (an fsync failing with EIO) propagates: it is an I/O error of the caller.
    """
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        if missing_ok:
            return
        raise
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path | str, *, missing_ok: bool = False) -> None:
    """Make a directory's entries (creations, renames, unlinks) durable."""
    fsync_path(path, missing_ok=missing_ok, flags=os.O_RDONLY | os.O_DIRECTORY)


def atomic_write(path: Path, text: str) -> None:
    """Replace `path` with `text` durably (tmp + fsync + rename + fsync of the directory)."""
    (error,) = atomic_write_many([(path, text)], threads=1)
    if error is not None:
        raise error


def _read_versioned_lines(path: Path) -> list[list[str]] | None:
    """Entry lines of a `version / count / entries` file, or None when the file is absent."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return None
    lines = text.splitlines()
    if len(lines) < 2:
        raise CheckpointError(f"{path}: truncated checkpoint")
    try:
        version = int(lines[0].strip())
        count = int(lines[1].strip())
    except ValueError:
        raise CheckpointError(f"{path}: malformed header") from None
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(f"{path}: unsupported version {version}")
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != count:
        raise CheckpointError(f"{path}: expected {count} entries, found {len(entries)}")
    return entries


def _write_versioned_lines(path: Path, lines: list[str]) -> None:
    body = "".join(line + "\n" for line in lines)
    atomic_write(path, f"{CHECKPOINT_VERSION}\n{len(lines)}\n{body}")


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """`topic partition offset` lines; an absent file reads as empty."""
    entries = _read_versioned_lines(path)
    out: dict[tuple[str, int], int] = {}
    for fields in entries or ():
        if len(fields) != 3:
            raise CheckpointError(f"{path}: malformed line {' '.join(fields)!r}")
        try:
            out[(fields[0], int(fields[1]))] = int(fields[2])
        except ValueError:
            raise CheckpointError(f"{path}: malformed line {' '.join(fields)!r}") from None
    return out


def write_offset_checkpoint(path: Path, offsets: Mapping[tuple[str, int], int]) -> None:
    lines = [f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items()]
    _write_versioned_lines(path, lines)


def read_epoch_checkpoint(path: Path) -> list[tuple[int, int]] | None:
    """(epoch, start offset) lines of leader-epoch-checkpoint; None when the file is absent."""
    entries = _read_versioned_lines(path)
    if entries is None:
        return None
    out: list[tuple[int, int]] = []
    for fields in entries:
        if len(fields) != 2:
            raise CheckpointError(f"{path}: malformed line {' '.join(fields)!r}")
        try:
            out.append((int(fields[0]), int(fields[1])))
        except ValueError:
            raise CheckpointError(f"{path}: malformed line {' '.join(fields)!r}") from None
    return out


def write_epoch_checkpoint(path: Path, entries: Iterable[tuple[int, int]]) -> None:
    _write_versioned_lines(path, [f"{epoch} {start}" for epoch, start in entries])


def topic_id_to_str(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid text form: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def topic_id_from_str(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise CheckpointError(f"bad topic id {text!r}")
    return uuid.UUID(bytes=raw)


def read_partition_metadata(path: Path) -> uuid.UUID | None:
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return None
    fields = dict(
        (k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in text.splitlines())
    )
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise CheckpointError(f"{path}: malformed partition metadata")
    return topic_id_from_str(fields["topic_id"])


def partition_metadata_text(topic_id: uuid.UUID) -> str:
    return f"version: 0\ntopic_id: {topic_id_to_str(topic_id)}\n"


def write_partition_metadata(path: Path, topic_id: uuid.UUID) -> None:
    atomic_write(path, partition_metadata_text(topic_id))


def read_properties(path: Path) -> dict[str, str] | None:
    """A Java properties file with `key=value` lines and `#` comments (what Kafka writes)."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return None
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, _, value = line.partition("=")
        out[key.strip()] = value.strip()
    return out


def write_meta_properties(path: Path, broker_id: int, cluster_id: str | None) -> None:
    """meta.properties of a ZooKeeper-mode broker (version 0)."""
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    lines = ["#", f"#{stamp}"]
    if cluster_id is not None:
        lines.append(f"cluster.id={cluster_id}")
    lines += ["version=0", f"broker.id={broker_id}"]
    atomic_write(path, "\n".join(lines) + "\n")


def write_clean_shutdown(path: Path, broker_epoch: int = -1) -> None:
    atomic_write(path, f'{{"version":0,"brokerEpoch":{broker_epoch}}}')


def _in_threads(
    fn: Callable[[Any], None], args: Sequence[Any], threads: int
) -> list[OSError | None]:
    """`fn(arg)` for each arg from up to `threads` threads; the OSError of each (or None)."""

    def one(arg: Any) -> OSError | None:
        try:
            fn(arg)
        except OSError as exc:
            return exc
        return None

    if not args:
        return []
    if threads == 1 or len(args) == 1:  # no thread to wait with
        return [one(arg) for arg in args]
    with ThreadPoolExecutor(min(threads, len(args)), thread_name_prefix="fsync") as pool:
        return list(pool.map(one, args))


def atomic_write_many(
    items: Sequence[tuple[Path, str]], *, threads: int = 16
) -> list[OSError | None]:
    """`atomic_write` for many files at once, each as durable as alone (its tmp file fsynced
    before the rename, its directory fsynced after), with the fsyncs issued from `threads`
    threads: a journaling file system commits concurrent fsyncs together, where one after the
    other each waits for a commit of its own (a topic of 1,000 partitions writes 1,000
    partition.metadata files). One error per item (None: written); each step is taken for
    every item before the next, so one item is `atomic_write` itself."""
    errors: list[OSError | None] = [None] * len(items)
    paths = [Path(path) for path, _ in items]
    tmps = [path.with_name(path.name + ".tmp") for path in paths]
    fds: dict[int, int] = {}
    try:
        for i, (_, text) in enumerate(items):
            try:
                fds[i] = fd = os.open(tmps[i], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                view = memoryview(text.encode())
                while view:
                    view = view[os.write(fd, view) :]
            except OSError as exc:
                errors[i] = exc
        written = [i for i in fds if errors[i] is None]
        synced = _in_threads(lambda i: os.fsync(fds[i]), written, threads)
        for i, exc in zip(written, synced, strict=True):
            errors[i] = exc
    finally:
        for fd in fds.values():
            os.close(fd)
    for i in range(len(items)):
        if errors[i] is None:
            try:
                os.replace(tmps[i], paths[i])
            except OSError as exc:
                errors[i] = exc
    parents: dict[Path, list[int]] = {}
    for i, path in enumerate(paths):
        if errors[i] is None:
            parents.setdefault(path.parent, []).append(i)
    synced = _in_threads(fsync_dir, list(parents), threads)
    for parent, exc in zip(parents, synced, strict=True):
        for i in parents[parent] if exc is not None else ():
            errors[i] = exc
    return errors
