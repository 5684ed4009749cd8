"""The ZooKeeper backend of the MetadataStore, over kazoo (production and cluster mode).

One `ZkStore` is one ZooKeeper session. It keeps the interface's semantics (see
`metadata_store.py`) across the failures a real ensemble has:

- Connection loss (a server dies, a network blip): kazoo reconnects to another server within the
  session timeout and the session survives. Calls that fail with a connection loss are sent again
  once connected, as Kafka's ZooKeeperClient does; a call that was applied but whose answer was lost
  may then report a conflict (NodeExists, BadVersion) like in Kafka, except that re-creating our
  own ephemeral node counts as success. Kazoo drops every watch on a disconnect (it does not send
  ZooKeeper's SetWatches), so the store re-arms them after the reconnect and compares the node's
  zxids with what the watcher saw: a change missed while disconnected fires the watch then.
- Session expiry: the ephemeral nodes and watches of the old session are gone. Kazoo opens a new
  session by itself; the store then runs the `on_session_expired(old_session_id)` and
  `on_new_session(new_session_id)` listeners (in that order, on the store's own thread) so the broker
  re-registers its ephemeral nodes and reads again what it was watching. Calls interrupted by the
  expiry raise `SessionExpiredError`.

`zookeeper.connect` may end with a chroot (`h1:2181,h2:2181/kafka`); like Kafka, the store creates
the chroot path when it is missing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from kazoo import exceptions as kz
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import Callback, KazooState, KeeperState, ZnodeStat
from kazoo.protocol.states import EventType as KzEventType
from kazoo.retry import KazooRetry

from .metadata_store import (
    CallbackThread,
    CheckOp,
    CreateOp,
    DeleteOp,
    EventType,
    MetadataStore,
    MetadataStoreError,
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
    parent_of,
    validate_path,
)
from .zk_kazoo import EVENT_TYPES, SessionExpiredError, op_error_path, stat_of, translate

log = logging.getLogger(__name__)

DEFAULT_SESSION_TIMEOUT_MS = 18000  # Kafka's zookeeper.session.timeout.ms default
# Subtrees up to this size are deleted in one transaction; larger ones in chunks (ZooKeeper
# refuses requests above jute.maxbuffer, 1 MiB by default).
ATOMIC_DELETE_LIMIT = 1000
_DELETE_CHUNK = 500

_T = TypeVar("_T")


class ConnectionTimeoutError(MetadataStoreError):
    """No ZooKeeper server answered within the connection timeout."""


def parse_connect(connect: str) -> tuple[str, str | None]:
    """Split `host:port[,host:port...][/chroot]` into the host list and the chroot (or None)."""
    hosts, slash, rest = connect.strip().partition("/")
    if not hosts:
        raise ValueError(f"no ZooKeeper host in {connect!r}")
    if not slash or not rest.strip("/"):
        return hosts, None
    chroot = "/" + rest.rstrip("/")
    validate_path(chroot)
    return hosts, chroot


class _Watch:
    """What kazoo holds for one registered watch.

    Kazoo keeps watchers in sets, so equal objects (same kind, path and user callback) collapse into
    one, giving ZooKeeper's "one event per watcher". `baseline` is the Stat the registering read
    returned (None: the node was absent), used to detect changes missed while disconnected.
    A `spent` watch has already been delivered by the store itself; it then equals nothing, so a
    fresh registration of the same callback is not absorbed by it, and its late events are ignored.
    """

    __slots__ = ("store", "kind", "path", "callback", "session", "baseline", "ready", "spent")

    def __init__(self, store: ZkStore, kind: str, path: str, callback: WatchCallback, session: int):
        self.store = store
        self.kind = kind  # "data" (get/exists) or "child" (get_children)
        self.path = path
        self.callback = callback
        self.session = session
        self.baseline: Stat | None = None
        self.ready = threading.Event()
        self.spent = False

    def _key(self) -> tuple[str, str, Any]:
        try:
            hash(self.callback)
            cb: Any = self.callback
        except TypeError:
            cb = id(self.callback)
        return (self.kind, self.path, cb)

    def __hash__(self) -> int:
        return hash(self._key())

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, _Watch) or self.spent or other.spent:
            return False
        return self._key() == other._key()

    def __call__(self, event: Any) -> None:
        self.store._on_kazoo_watch(self, event)

    def settle(self, stat: Stat | None) -> None:
        self.baseline = stat
        self.ready.set()


class ZkStore(MetadataStore):
    """A ZooKeeper session behind the MetadataStore interface.

    `connect`: `zookeeper.connect`. `session_timeout_ms`: requested session timeout (the servers
    bound it by their min/maxSessionTimeout). `connection_timeout_ms`: how long the constructor waits
    for the first connection (default: the session timeout, as Kafka); ConnectionTimeoutError then.
    Listeners (also addable later with `add_session_listener`) run on the store's thread and may
    call the store.
    """

    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        connection_timeout_ms: int | None = None,
        on_session_expired: Callable[[int], None] | None = None,
        on_new_session: Callable[[int], None] | None = None,
    ) -> None:
        self.connect_string = connect
        hosts, self.chroot = parse_connect(connect)
        self.session_timeout_ms = session_timeout_ms
        timeout_s = (connection_timeout_ms or session_timeout_ms) / 1000.0
        self._lock = threading.Lock()
        self._closed = False
        self._connected = threading.Event()
        self._session_id = 0
        self._expired_listeners: list[Callable[[int], None]] = []
        self._new_session_listeners: list[Callable[[int], None]] = []
        self.add_session_listener(on_session_expired, on_new_session)
        self._lost_watches: list[_Watch] = []
        if self.chroot is not None:
            self._create_chroot(hosts, self.chroot, timeout_s)
        self._callbacks = CallbackThread(f"zk-store:{connect}")
        self._client = self._new_client(hosts + (self.chroot or ""))
        self._client.add_listener(self._on_state)
        try:
            self._client.start(timeout=timeout_s)
        except KazooTimeoutError:
            self._shutdown()
            raise ConnectionTimeoutError(
                None, f"no ZooKeeper server of {connect} answered within {timeout_s:g}s"
            ) from None
        client_id = self._client.client_id
        assert client_id is not None
        with self._lock:
            self._session_id = client_id[0]

    @classmethod
    def from_config(cls, config: Any, **listeners: Any) -> ZkStore:
        """A store for a BrokerConfig (`zookeeper.connect`, `zookeeper.*.timeout.ms`)."""
        return cls(
            config.zookeeper_connect,
            session_timeout_ms=config.get("zookeeper.session.timeout.ms"),
            connection_timeout_ms=config.get("zookeeper.connection.timeout.ms"),
            **listeners,
        )

    def _new_client(self, hosts: str) -> KazooClient:
        # Reconnect attempts go through every host each round; cap the back-off so a returning
        # ensemble is found quickly (kazoo's default grows up to an hour).
        retry = KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0)
        return KazooClient(
            hosts=hosts,
            timeout=self.session_timeout_ms / 1000.0,
            connection_retry=retry,
            command_retry=KazooRetry(max_tries=0),
            logger=logging.getLogger("kazoo.client"),
        )

    def _create_chroot(self, hosts: str, chroot: str, timeout_s: float) -> None:
        bootstrap = self._new_client(hosts)
        try:
            bootstrap.start(timeout=timeout_s)
        except KazooTimeoutError:
            bootstrap.close()
            raise ConnectionTimeoutError(
                None, f"no ZooKeeper server of {hosts} answered within {timeout_s:g}s"
            ) from None
        try:
            bootstrap.ensure_path(chroot)
        finally:
            bootstrap.stop()
            bootstrap.close()

    # -- session state

    @property
    def connected(self) -> bool:
        return self._connected.is_set() and not self._closed

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def session_password(self) -> bytes:
        """With `session_id`, what another client needs to join (and close) this session."""
        client_id = self._client.client_id
        return client_id[1] if client_id else b""

    def add_session_listener(
        self,
        on_session_expired: Callable[[int], None] | None = None,
        on_new_session: Callable[[int], None] | None = None,
    ) -> None:
        """`on_session_expired(old_session_id)` runs when ZooKeeper reports the session expired;
        `on_new_session(new_session_id)` when the replacement session is connected. Both run on
        the store's thread, in order, after every earlier listener call returned."""
        if on_session_expired is not None:
            self._expired_listeners.append(on_session_expired)
        if on_new_session is not None:
            self._new_session_listeners.append(on_new_session)

    def _on_state(self, state: KazooState) -> None:
        """Kazoo's connection thread: must not block."""
        if state == KazooState.CONNECTED:
            client_id = self._client.client_id
            if client_id is None:
                return
            with self._lock:
                previous, self._session_id = self._session_id, client_id[0]
                self._connected.set()
            if previous and previous != self._session_id:
                self._callbacks.put(
                    lambda sid=self._session_id: self._notify(self._new_session_listeners, sid)
                )
            self._callbacks.put(self._rearm_lost_watches)
        elif state == KazooState.SUSPENDED:
            self._connected.clear()
        elif state == KazooState.LOST:
            self._connected.clear()
            if self._closed:
                return
            old = self._session_id
            log.warning("ZooKeeper session 0x%x expired", old)
            self._callbacks.put(lambda: self._notify(self._expired_listeners, old))

    def _notify(self, listeners: list[Callable[[int], None]], session: int) -> None:
        for listener in list(listeners):
            try:
                listener(session)
            except Exception:
                log.exception("ZooKeeper session listener %r failed", listener)

    # -- calls

    def _call(
        self,
        fn: Callable[[], _T],
        path: str | None,
        on_conflict_after_loss: Callable[[MetadataStoreError], _T] | None = None,
    ) -> _T:
        """Run a kazoo call, sending it again after a connection loss while the session lives."""
        session = self._session_id
        lost = False
        while True:
            self._check_open()
            try:
                return fn()
            except kz.ConnectionLoss:
                lost = True
                self._wait_connected()
                if self._session_id != session:
                    raise SessionExpiredError(path) from None
            except kz.KazooException as e:
                error = translate(e, path)
                if self._closed and isinstance(error, StoreClosedError):
                    raise StoreClosedError(path, "metadata store session is closed") from None
                if lost and on_conflict_after_loss is not None:
                    return on_conflict_after_loss(error)
                raise error from None

    def _wait_connected(self) -> None:
        while not self._connected.wait(1.0):
            self._check_open()
        self._check_open()

    def _watch(self, kind: str, path: str, callback: WatchCallback | None) -> _Watch | None:
        return (
            _Watch(self, kind, path, callback, self._session_id) if callback is not None else None
        )

    # -- reads

    def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        validate_path(path)
        w = self._watch("data", path, watch)
        data, zstat = self._call(lambda: self._client.get(path, watch=w), path)
        stat = stat_of(zstat)
        if w is not None:
            w.settle(stat)
        return data or b"", stat

    def exists(self, path: str, watch: WatchCallback | None = None) -> Stat | None:
        validate_path(path)
        w = self._watch("data", path, watch)
        zstat = self._call(lambda: self._client.exists(path, watch=w), path)
        stat = stat_of(zstat) if zstat is not None else None
        if w is not None:
            w.settle(stat)
        return stat

    def get_children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        validate_path(path)
        w = self._watch("child", path, watch)
        if w is None:
            return sorted(self._call(lambda: self._client.get_children(path), path))
        children, zstat = self._call(
            lambda: self._client.get_children(path, watch=w, include_data=True), path
        )
        w.settle(stat_of(zstat))
        return sorted(children)

    # -- writes

    def _create_node(
        self, path: str, data: bytes, ephemeral: bool, sequential: bool, makepath: bool
    ) -> str:
        try:
            return self._create(path, data, ephemeral, sequential)
        except NoNodeError:
            if not makepath:
                raise
        self._create_parents(parent_of(path))
        return self._create(path, data, ephemeral, sequential)

    def _create(self, path: str, data: bytes, ephemeral: bool, sequential: bool) -> str:
        def retried(error: MetadataStoreError) -> str:
            # Our create went through before the connection broke: the node is ours.
            if isinstance(error, NodeExistsError) and ephemeral and not sequential:
                stat = self.exists(path)
                if stat is not None and stat.ephemeral_owner == self._session_id:
                    return path
            raise error

        try:
            return self._call(
                lambda: self._client.create(path, data, ephemeral=ephemeral, sequence=sequential),
                path,
                retried,
            )
        except NoNodeError as e:
            raise NoNodeError(parent_of(path)) from e

    def _create_parents(self, path: str) -> None:
        if path == "/":
            return
        try:
            self._create(path, b"", False, False)
        except NodeExistsError:
            pass
        except NoNodeError:
            self._create_parents(parent_of(path))
            try:
                self._create(path, b"", False, False)
            except NodeExistsError:
                pass

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        validate_path(path)
        return stat_of(self._call(lambda: self._client.set(path, bytes(data), version), path))

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        validate_path(path, allow_root=False)
        if not recursive:
            self._call(lambda: self._client.delete(path, version), path)
            return
        while True:
            subtree = self._subtree(path)
            if len(subtree) > ATOMIC_DELETE_LIMIT:
                # Too big for one request: delete descendants in chunks, each guarded by the
                # top node's version, then the rest atomically.
                chunk: list[Op] = [CheckOp(path, version)]
                chunk += [DeleteOp(p) for p in subtree[:_DELETE_CHUNK]]
                try:
                    self.multi(chunk)
                except (NoNodeError, NotEmptyError) as e:
                    if e.op_index == 0:
                        raise
                continue
            ops: list[Op] = [DeleteOp(p) for p in subtree[:-1]]
            ops.append(DeleteOp(path, version))
            try:
                self.multi(ops)
                return
            except NoNodeError as e:
                if e.op_index == len(ops) - 1:
                    raise
            except NotEmptyError:
                pass  # children appeared meanwhile: collect again

    def _subtree(self, path: str) -> list[str]:
        """Post-order (children first) list of `path`'s subtree; NoNodeError if absent."""
        out: list[str] = []

        def walk(p: str, top: bool) -> None:
            try:
                children = self.get_children(p)
            except NoNodeError:
                if top:
                    raise
                return
            for child in children:
                walk(join(p, child), False)
            out.append(p)

        walk(path, True)
        return out

    def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        ops = list(ops)
        if not ops:
            return []
        for op in ops:
            validate_path(op.path, allow_root=isinstance(op, CheckOp | SetOp))

        def run() -> list[Any]:
            txn = self._client.transaction()
            for op in ops:
                if isinstance(op, CheckOp):
                    txn.check(op.path, op.version)
                elif isinstance(op, CreateOp):
                    txn.create(op.path, bytes(op.data), ephemeral=op.ephemeral,
                               sequence=op.sequential)  # fmt: skip
                elif isinstance(op, SetOp):
                    txn.set_data(op.path, bytes(op.data), op.version)
                elif isinstance(op, DeleteOp):
                    txn.delete(op.path, op.version)
                else:
                    raise TypeError(f"unknown operation {op!r}")
            return txn.commit()

        results = self._call(run, None)
        for index, result in enumerate(results):
            if isinstance(result, Exception) and not isinstance(
                result, kz.RolledBackError | kz.RuntimeInconsistency
            ):
                error = translate(result, op_error_path(ops[index], result))
                error.op_index = index
                raise error
        out: list[OpResult] = []
        for result in results:
            out.append(stat_of(result) if isinstance(result, ZnodeStat) else result)
        return out

    # -- watches

    def _on_kazoo_watch(self, w: _Watch, event: Any) -> None:
        """Kazoo's callback thread."""
        if event.type == KzEventType.NONE:
            # The connection dropped and kazoo forgot the watch. While the session lives (state
            # CONNECTING) re-arm it after the reconnect; an expired session's watches are over.
            if event.state == KeeperState.CONNECTING and not w.spent and not self._closed:
                with self._lock:
                    self._lost_watches.append(w)
                self._callbacks.put(self._rearm_lost_watches)
            return
        if w.spent:
            return
        w.spent = True
        self._deliver(w, EVENT_TYPES[event.type])

    def _deliver(self, w: _Watch, etype: EventType) -> None:
        deliver_watch(w.callback, WatchedEvent(etype, w.path))

    def _rearm_lost_watches(self) -> None:
        """The store's thread: put the watches lost by a disconnect back on the server."""
        self._wait_connected()
        with self._lock:
            lost, self._lost_watches = self._lost_watches, []
        for i, w in enumerate(lost):
            if w.session != self._session_id:
                continue  # that session expired: the listeners take over
            try:
                self._rearm(w)
            except kz.ConnectionLoss:
                # Disconnected again: keep the rest for the next reconnect.
                with self._lock:
                    self._lost_watches[:0] = lost[i:]
                return
            except kz.KazooException:
                log.exception("could not re-arm the watch on %s", w.path)

    def _rearm(self, w: _Watch) -> None:
        w.ready.wait(5.0)
        fresh = _Watch(self, w.kind, w.path, w.callback, w.session)
        before = w.baseline
        etype: EventType | None = None
        if w.kind == "data":
            zstat = self._client.exists(w.path, watch=fresh)
            now = stat_of(zstat) if zstat is not None else None
            if before is None:
                etype = EventType.CREATED if now is not None else None
            elif now is None or now.czxid != before.czxid:
                etype = EventType.DELETED
            elif now.mzxid != before.mzxid:
                etype = EventType.CHANGED
        else:
            try:
                _, zstat = self._client.get_children(w.path, watch=fresh, include_data=True)
                now = stat_of(zstat)
            except kz.NoNodeError:
                now = None
            if before is None or now is None or now.czxid != before.czxid:
                etype = EventType.DELETED
            elif now.pzxid != before.pzxid:
                etype = EventType.CHILD
        fresh.settle(now)
        if etype is not None:
            # The change happened while we were away: deliver it now, on kazoo's callback thread
            # like every other event, and make the just-armed server watch a no-op.
            log.info("%s of %s happened while disconnected: firing its watch", etype.name, w.path)
            fresh.spent = True
            w.spent = True
            event_type = etype
            self._client.handler.dispatch_callback(
                Callback("watch", lambda: self._deliver(w, event_type), ())
            )

    def wait_for_watches(self) -> None:
        """Block until the callbacks of watches triggered by changes this session has seen have
        run (tests, orderly shutdown). Not from a watch callback or a session listener."""
        self._call(lambda: self._client.sync("/"), "/")
        self._callbacks.join()
        done = threading.Event()
        self._client.handler.dispatch_callback(Callback("watch", done.set, ()))
        while not done.wait(1.0):
            self._check_open()

    # -- lifecycle

    def close(self) -> None:
        """Close the session (its ephemeral nodes go at once) and stop kazoo's threads."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._connected.set()  # wake waiters; they see the store closed
        self._shutdown()

    def _shutdown(self) -> None:
        self._closed = True
        client = self._client
        me = threading.current_thread()
        workers = list(getattr(client.handler, "_workers", []))

        def stop() -> None:
            try:
                client.stop()
                client.close()
            except Exception:
                log.exception("closing the ZooKeeper client failed")

        if me in workers:
            # A watch callback closes the store: kazoo cannot join its own thread.
            threading.Thread(target=stop, name="zk-store-close", daemon=True).start()
        else:
            stop()
        self._callbacks.stop()
