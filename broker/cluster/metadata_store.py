"""The metadata store interface: a small subset of ZooKeeper that all cluster logic uses.

Two backends implement it: ZooKeeper through kazoo (production, a thin adapter) and the
embedded, file-backed store (single broker, `embedded_store.py`). Semantics follow ZooKeeper:

- Paths are absolute, `/`-separated, without a trailing slash; `/` is the root.
- Every node has data (bytes, possibly empty) and a `Stat`. `version` counts data changes and
  is what `set`/`delete`/`check` compare against; -1 means "any version".
- Ephemeral nodes belong to the session that created them and vanish when it ends; they cannot
  have children. Sequential nodes get a 10-digit, zero-padded counter appended to their name
  (the parent's child-change counter, `cversion`).
- Watches are one-shot. A data watch (`get`/`exists` with `watch=`) fires once on the next
  creation, data change or deletion of that node; a child watch (`get_children`) fires once on
  the next child creation/deletion or deletion of the node. Re-register in the callback to keep
  watching. Callbacks run on a thread owned by the store (never the caller's thread and never
  while the store holds its lock), after the change is visible to readers. From asyncio code use
  `loop.call_soon_threadsafe` in the callback.
- `multi` applies a list of operations atomically: all succeed or none is applied.

All methods are blocking; async callers run them in an executor (see `run_blocking`).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

log = logging.getLogger(__name__)


class MetadataStoreError(Exception):
    """Base class of store errors; `path` is the node concerned when known."""

    def __init__(self, path: str | None = None, message: str | None = None) -> None:
        super().__init__(message or f"{type(self).__name__}: {path}")
        self.path = path
        self.op_index: int | None = None  # set by multi(): index of the failing operation


class NoNodeError(MetadataStoreError):
    """The node (or, for create, its parent) does not exist."""


class NodeExistsError(MetadataStoreError):
    """create() on an existing path."""


class BadVersionError(MetadataStoreError):
    """The expected version did not match the node's current version."""


class NotEmptyError(MetadataStoreError):
    """delete() of a node that has children (without recursive=True)."""


class NoChildrenForEphemeralsError(MetadataStoreError):
    """create() under an ephemeral node."""


class StoreClosedError(MetadataStoreError):
    """The session is closed (ZooKeeper: session expired / connection closed)."""


@dataclass(frozen=True)
class Stat:
    """A node's metadata, ZooKeeper's Stat in snake_case.

    czxid/mzxid/pzxid: transaction ids of creation, last data change, last child change;
    ctime/mtime in epoch milliseconds; version: data version; cversion: child version;
    ephemeral_owner: owning session id, 0 for persistent nodes.
    """

    czxid: int
    mzxid: int
    pzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int


class EventType(Enum):
    CREATED = "CREATED"
    DELETED = "DELETED"
    CHANGED = "CHANGED"
    CHILD = "CHILD"


@dataclass(frozen=True)
class WatchedEvent:
    type: EventType
    path: str


WatchCallback = Callable[[WatchedEvent], None]


# Operations for multi() ------------------------------------------------------------------


@dataclass(frozen=True)
class CheckOp:
    """Fails the transaction unless `path` exists with `version` (the fencing primitive)."""

    path: str
    version: int


@dataclass(frozen=True)
class CreateOp:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


@dataclass(frozen=True)
class SetOp:
    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True)
class DeleteOp:
    path: str
    version: int = -1


Op = CheckOp | CreateOp | SetOp | DeleteOp
# Result per op: CheckOp -> True, CreateOp -> created path, SetOp -> Stat, DeleteOp -> True.
OpResult = bool | str | Stat


class MetadataStore(ABC):
    """A session on a ZooKeeper-like store. See the module docstring for the semantics.

    Backends set `_session_id` (the current session) and keep `closed` up to date."""

    _session_id: int = 0

    @property
    def session_id(self) -> int:
        """Id of this session; ephemeral nodes it creates carry it as `ephemeral_owner`.
        (A ZooKeeper session that expired is replaced: the id then changes.)"""
        return self._session_id

    @property
    @abstractmethod
    def closed(self) -> bool:
        """Whether the session is over: every call then raises StoreClosedError."""

    def _check_open(self) -> None:
        if self.closed:
            raise StoreClosedError(None, "metadata store session is closed")

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        makepath: bool = False,
    ) -> str:
        """Create a node; returns its actual path (differs for sequential nodes).

        `makepath` creates missing parents as empty persistent nodes.
        Raises NodeExistsError, NoNodeError (no parent), NoChildrenForEphemeralsError.
        """
        validate_path(path, allow_root=False)
        return self._create_node(path, bytes(data), ephemeral, sequential, makepath)

    @abstractmethod
    def _create_node(
        self, path: str, data: bytes, ephemeral: bool, sequential: bool, makepath: bool
    ) -> str:
        """`create` once the path is known valid."""

    @abstractmethod
    def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        """Data and Stat of a node; NoNodeError if absent (and then no watch is set)."""

    @abstractmethod
    def exists(self, path: str, watch: WatchCallback | None = None) -> Stat | None:
        """Stat or None. The watch is set either way (fires on creation if absent)."""

    @abstractmethod
    def get_children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        """Names (not paths) of the children, sorted; NoNodeError if absent (no watch set)."""

    @abstractmethod
    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        """Replace a node's data; NoNodeError, BadVersionError."""

    @abstractmethod
    def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        """Delete a node (and with `recursive` its subtree, version applying to the top node).

        NoNodeError, BadVersionError, NotEmptyError.
        """

    @abstractmethod
    def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        """Apply operations atomically. On failure nothing is applied and the error of the first
        failing operation is raised with `op_index` set."""

    @abstractmethod
    def close(self) -> None:
        """End the session: its ephemeral nodes are deleted and its watches dropped."""

    def add_session_listener(
        self,
        on_session_expired: Callable[[int], None] | None = None,
        on_new_session: Callable[[int], None] | None = None,
    ) -> None:
        """Be told when the session expires (`on_session_expired(old id)`) and when its
        replacement is connected (`on_new_session(new id)`): the old session's watches are then
        gone. A backend whose sessions never expire never calls them."""
        return  # the embedded store: its sessions end only when closed

    # -- helpers shared by all backends

    def ensure_path(self, path: str) -> None:
        """Create `path` and its parents as empty persistent nodes if missing."""
        if path == "/" or self.exists(path) is not None:
            return
        try:
            self.create(path, b"", makepath=True)
        except NodeExistsError:
            pass

    def __enter__(self) -> MetadataStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def deliver_watch(callback: WatchCallback, event: WatchedEvent) -> None:
    """Run a watch callback; its failure is logged and stops nothing else."""
    try:
        callback(event)
    except Exception:
        log.exception("metadata store watch callback failed for %s %s", event.type.name, event.path)


class CallbackThread:
    """The store's own thread: runs queued callables in order (watch deliveries, session
    listeners), so they never run on the caller's thread nor while a store lock is held."""

    def __init__(self, name: str) -> None:
        self._queue: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, task: Callable[[], None]) -> None:
        self._queue.put(task)

    def _run(self) -> None:
        while True:
            task = self._queue.get()
            try:
                if task is None:
                    return
                task()
            except StoreClosedError:
                pass
            except Exception:
                log.exception("metadata store task failed")
            finally:
                self._queue.task_done()

    def join(self) -> None:
        """Block until every task queued so far has run (a no-op on the thread itself)."""
        if threading.current_thread() is not self._thread:
            self._queue.join()

    def stop(self) -> None:
        """Run what is queued, then end the thread (waiting for it unless called on it)."""
        self._queue.put(None)
        if threading.current_thread() is not self._thread and self._thread.is_alive():
            self._thread.join()


_SEGMENT_RE = re.compile(r"[^/\x00]+")


def validate_path(path: str, *, allow_root: bool = True) -> None:
    """ZooKeeper's path rules (absolute, no empty/./.. segments, no trailing slash)."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"Path must start with / character: {path!r}")
    if path == "/":
        if not allow_root:
            raise ValueError("Invalid path: the root is not allowed here")
        return
    if path.endswith("/"):
        raise ValueError(f"Path must not end with / character: {path!r}")
    for seg in path[1:].split("/"):
        if not seg:
            raise ValueError(f"Empty node name in path: {path!r}")
        if seg in (".", ".."):
            raise ValueError(f"Relative paths are not allowed: {path!r}")
        if not _SEGMENT_RE.fullmatch(seg):
            raise ValueError(f"Invalid character in path: {path!r}")


def parent_of(path: str) -> str:
    head = path.rsplit("/", 1)[0]
    return head or "/"


def name_of(path: str) -> str:
    return path.rsplit("/", 1)[1]


def join(parent: str, child: str) -> str:
    return f"{parent}/{child}" if parent != "/" else f"/{child}"


_T = TypeVar("_T")


async def run_blocking(executor: Executor | None, fn: Callable[..., _T], *args: Any) -> _T:
    """Run a blocking store call from asyncio. A single-thread executor keeps calls ordered."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(executor, lambda: fn(*args))


class StoreCalls:
    """`await calls(fn, *args)` runs a blocking store call off the event loop, in order: on the
    given executor, or on a single thread of its own that `close` shuts down."""

    def __init__(self, executor: Executor | None, thread_name: str) -> None:
        self._owned = executor is None
        self.executor: Executor = executor or ThreadPoolExecutor(1, thread_name_prefix=thread_name)

    async def __call__(self, fn: Callable[..., _T], *args: Any) -> _T:
        return await run_blocking(self.executor, fn, *args)

    def close(self) -> None:
        if self._owned:
            self.executor.shutdown(wait=True)
