"""An in-process, file-backed MetadataStore for single-broker mode (no ZooKeeper needed).

Durability: every committed transaction is appended to a write-ahead log (`txn.log`) and
fsynced before the call returns, so a restart (even after kill -9) sees every completed
operation. Records are length-prefixed and CRC-checked; a torn tail is discarded on open. The
log is folded into an atomically replaced snapshot (`snapshot.json`, write-fsync-rename-fsync)
at open and whenever it grows past `compact_bytes`. Records carry their zxid so a record already
contained in the snapshot is skipped if a crash hit between the rename and the log truncation.

Sessions: the object returned by `EmbeddedStore(dir)` is the primary session; `new_session()`
opens more sessions on the same data (handy for tests with several brokers or controllers).
Ephemeral nodes die with their session, and every ephemeral node left in the files belonged to
a previous process, so they are removed at open.

Watches: one-shot, ZooKeeper semantics, delivered in commit order by one dispatcher thread
per store (never while the store lock is held).

A directory can be open in only one process at a time (flock on `<dir>/lock`).
"""

from __future__ import annotations

import base64
import copy
import fcntl
import functools
import json
import logging
import os
import secrets
import struct
import threading
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..storage.checkpoint import fsync_dir
from .metadata_store import (
    BadVersionError,
    CallbackThread,
    CheckOp,
    CreateOp,
    DeleteOp,
    EventType,
    MetadataStore,
    MetadataStoreError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    OpResult,
    SetOp,
    Stat,
    StoreClosedError,
    WatchCallback,
    WatchedEvent,
    deliver_watch,
    join,
    name_of,
    parent_of,
    validate_path,
)

log = logging.getLogger(__name__)

SNAPSHOT = "snapshot.json"
TXN_LOG = "txn.log"
LOCK = "lock"
_HEADER = struct.Struct(">II")  # payload length, crc32(payload)


class StoreLockedError(MetadataStoreError):
    """Another process has the store directory open."""


@dataclass
class _Node:
    data: bytes
    czxid: int
    mzxid: int
    pzxid: int
    ctime: int
    mtime: int
    version: int = 0
    cversion: int = 0
    ephemeral_owner: int = 0
    children: set[str] = field(default_factory=set)

    def stat(self) -> Stat:
        return Stat(
            czxid=self.czxid,
            mzxid=self.mzxid,
            pzxid=self.pzxid,
            ctime=self.ctime,
            mtime=self.mtime,
            version=self.version,
            cversion=self.cversion,
            aversion=0,
            ephemeral_owner=self.ephemeral_owner,
            data_length=len(self.data),
            num_children=len(self.children),
        )

    def clone(self) -> _Node:
        node = copy.copy(self)
        node.children = set(self.children)
        return node


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class _Txn:
    """One transaction being applied: remembers the original of every node it touches (for
    rollback), the resolved operations (for the log) and the watch events (fired on commit)."""

    def __init__(self, db: _Database, zxid: int, now: int) -> None:
        self.db = db
        self.zxid = zxid
        self.now = now
        self.originals: dict[str, _Node | None] = {}
        self.records: list[list[Any]] = []
        self.events: list[tuple[str, str, EventType]] = []  # (kind: data|child, path, type)

    def touch(self, path: str) -> _Node | None:
        node = self.db.nodes.get(path)
        if path not in self.originals:
            self.originals[path] = node.clone() if node is not None else None
        return node

    def rollback(self) -> None:
        for path, original in self.originals.items():
            if original is None:
                self.db.nodes.pop(path, None)
            else:
                self.db.nodes[path] = original

    # -- primitive mutations (also used by replay)

    def create(self, path: str, data: bytes, owner: int, sequential: bool = False) -> str:
        parent_path = parent_of(path)
        parent = self.touch(parent_path)
        if parent is None:
            raise NoNodeError(parent_path)
        if parent.ephemeral_owner:
            raise NoChildrenForEphemeralsError(parent_path)
        if sequential:
            path = f"{path}{parent.cversion:010d}"
        if path in self.db.nodes:
            raise NodeExistsError(path)
        self.touch(path)
        self.db.nodes[path] = _Node(data, self.zxid, self.zxid, self.zxid, self.now, self.now,
                                    ephemeral_owner=owner)  # fmt: skip
        parent.children.add(name_of(path))
        parent.cversion += 1
        parent.pzxid = self.zxid
        self.records.append(["c", path, _b64(data), owner])
        self.events.append(("data", path, EventType.CREATED))
        self.events.append(("child", parent_path, EventType.CHILD))
        return path

    def set(self, path: str, data: bytes, version: int) -> Stat:
        node = self.touch(path)
        if node is None:
            raise NoNodeError(path)
        if version != -1 and version != node.version:
            raise BadVersionError(path)
        node.data = data
        node.version += 1
        node.mzxid = self.zxid
        node.mtime = self.now
        self.records.append(["s", path, _b64(data)])
        self.events.append(("data", path, EventType.CHANGED))
        return node.stat()

    def delete(self, path: str, version: int) -> None:
        if path == "/":
            raise ValueError("cannot delete the root")
        node = self.touch(path)
        if node is None:
            raise NoNodeError(path)
        if version != -1 and version != node.version:
            raise BadVersionError(path)
        if node.children:
            raise NotEmptyError(path)
        parent_path = parent_of(path)
        parent = self.touch(parent_path)
        assert parent is not None
        del self.db.nodes[path]
        parent.children.discard(name_of(path))
        parent.cversion += 1
        parent.pzxid = self.zxid
        self.records.append(["d", path])
        self.events.append(("data", path, EventType.DELETED))
        self.events.append(("child", path, EventType.DELETED))
        self.events.append(("child", parent_path, EventType.CHILD))

    def check(self, path: str, version: int) -> None:
        node = self.db.nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        if version != -1 and version != node.version:
            raise BadVersionError(path)


class _Database:
    """State shared by all sessions of one store directory."""

    def __init__(self, directory: str, *, fsync: bool, compact_bytes: int) -> None:
        self.directory = directory
        self.fsync = fsync
        self.compact_bytes = compact_bytes
        self.lock = threading.RLock()
        self.nodes: dict[str, _Node] = {}
        self.zxid = 0
        self.sessions: dict[int, EmbeddedStore] = {}
        # path -> {callback id -> (session id, callback)}; dicts keep registration order
        self.data_watches: dict[str, dict[int, tuple[int, WatchCallback]]] = {}
        self.child_watches: dict[str, dict[int, tuple[int, WatchCallback]]] = {}
        self.closed = False
        os.makedirs(directory, exist_ok=True)
        self._lock_fd = os.open(os.path.join(directory, LOCK), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise StoreLockedError(
                directory,
                f"metadata store {directory} is in use by another process (another broker "
                "with the same log.dirs?)",
            ) from None
        try:
            self._load()
            self._drop_stale_ephemerals()
            self._write_snapshot()
        except BaseException:
            os.close(self._lock_fd)
            raise
        self._log = open(os.path.join(directory, TXN_LOG), "ab", buffering=0)  # noqa: SIM115
        self._callbacks = CallbackThread(f"metadata-watches:{directory}")

    # -- persistence

    def _load(self) -> None:
        snap_path = os.path.join(self.directory, SNAPSHOT)
        if os.path.exists(snap_path):
            with open(snap_path, encoding="utf-8") as f:
                snap = json.load(f)
            self.zxid = snap["zxid"]
            for path, data, czxid, mzxid, pzxid, ctime, mtime, ver, cver, owner in snap["nodes"]:
                self.nodes[path] = _Node(base64.b64decode(data), czxid, mzxid, pzxid, ctime,
                                         mtime, ver, cver, owner)  # fmt: skip
            for path in self.nodes:
                if path != "/":
                    self.nodes[parent_of(path)].children.add(name_of(path))
        else:
            self.nodes["/"] = _Node(b"", 0, 0, 0, 0, 0)
        self._replay()

    def _replay(self) -> None:
        log_path = os.path.join(self.directory, TXN_LOG)
        if not os.path.exists(log_path):
            return
        with open(log_path, "rb") as f:
            buf = f.read()
        pos = 0
        while pos + _HEADER.size <= len(buf):
            length, crc = _HEADER.unpack_from(buf, pos)
            payload = buf[pos + _HEADER.size : pos + _HEADER.size + length]
            if len(payload) != length or zlib.crc32(payload) != crc:
                break
            record = json.loads(payload)
            if record["z"] > self.zxid:
                self._apply_record(record)
            pos += _HEADER.size + length
        if pos != len(buf):
            log.warning(
                "metadata store %s: discarding %d bytes of incomplete log tail",
                self.directory,
                len(buf) - pos,
            )

    def _apply_record(self, record: dict[str, Any]) -> None:
        txn = _Txn(self, record["z"], record["t"])
        for op in record["ops"]:
            if op[0] == "c":
                txn.create(op[1], base64.b64decode(op[2]), op[3])
            elif op[0] == "s":
                txn.set(op[1], base64.b64decode(op[2]), -1)
            elif op[0] == "d":
                txn.delete(op[1], -1)
        self.zxid = record["z"]

    def _drop_stale_ephemerals(self) -> None:
        stale = sorted((p for p, n in self.nodes.items() if n.ephemeral_owner), reverse=True)
        if stale:
            self.zxid += 1
            txn = _Txn(self, self.zxid, _now_ms())
            for path in stale:
                txn.delete(path, -1)

    def _write_snapshot(self) -> None:
        nodes = [
            [p, _b64(n.data), n.czxid, n.mzxid, n.pzxid, n.ctime, n.mtime, n.version,
             n.cversion, n.ephemeral_owner]
            for p, n in sorted(self.nodes.items())
        ]  # fmt: skip
        tmp = os.path.join(self.directory, SNAPSHOT + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"format": 1, "zxid": self.zxid, "nodes": nodes}, f, separators=(",", ":"))
            f.flush()
            if self.fsync:
                os.fsync(f.fileno())
        os.replace(tmp, os.path.join(self.directory, SNAPSHOT))
        self._fsync_dir()
        with open(os.path.join(self.directory, TXN_LOG), "wb") as f:
            if self.fsync:
                os.fsync(f.fileno())

    def _fsync_dir(self) -> None:
        if not self.fsync:
            return
        fsync_dir(self.directory)

    def _append(self, txn: _Txn) -> None:
        payload = json.dumps(
            {"z": txn.zxid, "t": txn.now, "ops": txn.records}, separators=(",", ":")
        ).encode()
        self._log.write(_HEADER.pack(len(payload), zlib.crc32(payload)) + payload)
        if self.fsync:
            os.fdatasync(self._log.fileno())
        if self._log.tell() > self.compact_bytes:
            self._log.close()
            self._write_snapshot()
            self._log = open(os.path.join(self.directory, TXN_LOG), "ab", buffering=0)  # noqa: SIM115

    # -- transactions

    def run(self, session: int, ops: Sequence[Op]) -> list[OpResult]:
        """Apply `ops` atomically for `session`; log, then fire watches."""
        with self.lock:
            if self.closed:
                raise StoreClosedError(None, "metadata store is closed")
            txn = _Txn(self, self.zxid + 1, _now_ms())
            results: list[OpResult] = []
            for index, op in enumerate(ops):
                try:
                    results.append(self._apply_op(txn, session, op))
                except MetadataStoreError as e:
                    txn.rollback()
                    e.op_index = index
                    raise
                except BaseException:
                    txn.rollback()
                    raise
            if txn.records:
                try:
                    self._append(txn)
                except BaseException:
                    txn.rollback()
                    raise
                self.zxid = txn.zxid
                self._queue_events(txn.events)
            return results

    @staticmethod
    def _apply_op(txn: _Txn, session: int, op: Op) -> OpResult:
        if isinstance(op, CreateOp):
            validate_path(op.path, allow_root=False)
            return txn.create(op.path, bytes(op.data), session if op.ephemeral else 0,
                              op.sequential)  # fmt: skip
        if isinstance(op, SetOp):
            validate_path(op.path)
            return txn.set(op.path, bytes(op.data), op.version)
        if isinstance(op, DeleteOp):
            validate_path(op.path, allow_root=False)
            txn.delete(op.path, op.version)
            return True
        if isinstance(op, CheckOp):
            validate_path(op.path)
            txn.check(op.path, op.version)
            return True
        raise TypeError(f"unknown operation {op!r}")

    # -- watches

    def add_watch(self, kind: str, path: str, session: int, cb: WatchCallback) -> None:
        table = self.data_watches if kind == "data" else self.child_watches
        table.setdefault(path, {})[id(cb)] = (session, cb)

    def _queue_events(self, events: list[tuple[str, str, EventType]]) -> None:
        for kind, path, etype in events:
            table = self.data_watches if kind == "data" else self.child_watches
            watchers = table.pop(path, None)
            if not watchers:
                continue
            for _session, cb in watchers.values():
                self._callbacks.put(functools.partial(deliver_watch, cb, WatchedEvent(etype, path)))

    def drop_watches(self, session: int) -> None:
        for table in (self.data_watches, self.child_watches):
            for path in list(table):
                watchers = {k: v for k, v in table[path].items() if v[0] != session}
                if watchers:
                    table[path] = watchers
                else:
                    del table[path]

    def wait_for_watches(self) -> None:
        """Block until every queued watch callback has run."""
        self._callbacks.join()

    # -- sessions

    def end_session(self, session: int) -> None:
        with self.lock:
            if self.closed or session not in self.sessions:
                return
            self.drop_watches(session)
            owned = sorted(
                (p for p, n in self.nodes.items() if n.ephemeral_owner == session), reverse=True
            )
            if owned:
                self.run(session, [DeleteOp(p) for p in owned])
            del self.sessions[session]

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            for session in list(self.sessions):
                self.end_session(session)
            self.closed = True
            self._log.close()
        self._callbacks.stop()
        fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        os.close(self._lock_fd)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class EmbeddedStore(MetadataStore):
    """A session on the embedded store. `EmbeddedStore(directory)` opens the directory and is
    its primary session: closing it closes every session and the files."""

    def __init__(
        self,
        directory: str,
        *,
        fsync: bool = True,
        compact_bytes: int = 8 * 1024 * 1024,
        _db: _Database | None = None,
    ) -> None:
        self._primary = _db is None
        self._db = _db or _Database(directory, fsync=fsync, compact_bytes=compact_bytes)
        self.directory = self._db.directory
        with self._db.lock:
            sid = secrets.randbits(63) | 1
            while sid in self._db.sessions:
                sid = secrets.randbits(63) | 1
            self._session_id = sid
            self._db.sessions[sid] = self
        self._closed = False

    def new_session(self) -> EmbeddedStore:
        """Another session on the same data (its own ephemerals and watches)."""
        self._check_open()
        return EmbeddedStore(self.directory, _db=self._db)

    # -- reads

    def _existing(self, path: str, kind: str, watch: WatchCallback | None) -> _Node:
        """Under the lock: the node at `path` (NoNodeError, and no watch, if absent), with a
        watch of `kind` ("data" or "child") set on it."""
        self._check_open()
        node = self._db.nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        if watch is not None:
            self._db.add_watch(kind, path, self._session_id, watch)
        return node

    def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        validate_path(path)
        with self._db.lock:
            node = self._existing(path, "data", watch)
            return node.data, node.stat()

    def exists(self, path: str, watch: WatchCallback | None = None) -> Stat | None:
        validate_path(path)
        with self._db.lock:
            self._check_open()
            if watch is not None:
                self._db.add_watch("data", path, self._session_id, watch)
            node = self._db.nodes.get(path)
            return node.stat() if node is not None else None

    def get_children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        validate_path(path)
        with self._db.lock:
            return sorted(self._existing(path, "child", watch).children)

    # -- writes

    def _run(self, ops: Sequence[Op]) -> list[OpResult]:
        self._check_open()
        return self._db.run(self._session_id, ops)

    def _create_node(
        self, path: str, data: bytes, ephemeral: bool, sequential: bool, makepath: bool
    ) -> str:
        if makepath:
            with self._db.lock:
                missing = []
                parent = parent_of(path)
                while parent != "/" and parent not in self._db.nodes:
                    missing.append(parent)
                    parent = parent_of(parent)
                ops: list[Op] = [CreateOp(p) for p in reversed(missing)]
                ops.append(CreateOp(path, data, ephemeral, sequential))
                return self._run(ops)[-1]  # type: ignore[return-value]
        return self._run([CreateOp(path, data, ephemeral, sequential)])[0]  # type: ignore[return-value]

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        return self._run([SetOp(path, data, version)])[0]  # type: ignore[return-value]

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        validate_path(path, allow_root=False)
        if not recursive:
            self._run([DeleteOp(path, version)])
            return
        with self._db.lock:
            if path not in self._db.nodes:
                raise NoNodeError(path)
            subtree: list[str] = []
            self._collect(path, subtree)
            ops: list[Op] = [DeleteOp(p) for p in subtree[:-1]]
            ops.append(DeleteOp(path, version))
            self._run(ops)

    def _collect(self, path: str, out: list[str]) -> None:
        """Post-order list of `path`'s subtree (children before parents)."""
        for child in sorted(self._db.nodes[path].children):
            self._collect(join(path, child), out)
        out.append(path)

    def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        return self._run(list(ops))

    # -- lifecycle

    def wait_for_watches(self) -> None:
        """Block until all watch callbacks queued so far have run (tests, orderly shutdown)."""
        self._db.wait_for_watches()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._primary:
            self._db.close()
        else:
            self._db.end_session(self._session_id)

    @property
    def closed(self) -> bool:
        return self._closed or self._db.closed
