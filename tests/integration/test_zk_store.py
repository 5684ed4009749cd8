"""ZkStore on a real three-server ZooKeeper ensemble: the metadata-store semantics the embedded
store's tests check, plus what only a real ensemble has (chroot, server failures, session expiry).

Every test works under its own chroot, so the shared ensemble needs no cleaning between tests.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Iterator

import pytest
from odradek.broker.cluster import zk_store
from odradek.broker.cluster.change_notifications import ChangeNotificationListener
from odradek.broker.cluster.kafka_zk import KafkaZk
from odradek.broker.cluster.metadata_store import (
    BadVersionError,
    EventType,
)
from odradek.broker.cluster.zk_store import ConnectionTimeoutError, ZkStore, parse_connect
from odradek.broker.config import load_config
from odradek.broker.testing.zookeeper import ZkEnsemble, ZkServer, four_letter_word, free_ports
from polling import wait_until
from watch_recorder import Recorder

SESSION_MS = 6000
WAIT = 60.0  # generous bound for waits on the ensemble; never a performance check


@pytest.fixture
def chroot() -> str:
    return f"/tests/{uuid.uuid4().hex[:12]}"


@pytest.fixture
def open_store(zk_ensemble: ZkEnsemble, chroot: str) -> Iterator[Callable[..., ZkStore]]:
    """Open sessions on the test's chroot; all are closed at the end."""
    stores: list[ZkStore] = []

    def factory(**kwargs) -> ZkStore:
        kwargs.setdefault("session_timeout_ms", SESSION_MS)
        s = ZkStore(zk_ensemble.connect_string(chroot), **kwargs)
        stores.append(s)
        return s

    yield factory
    for s in stores:
        s.close()


@pytest.fixture
def store(open_store: Callable[..., ZkStore]) -> ZkStore:
    return open_store()


def server_of(ensemble: ZkEnsemble, session_id: int) -> ZkServer:
    """The server a session is connected to (from the `cons` four-letter word)."""
    marker = f"sid=0x{session_id:x}"
    for s in ensemble.servers:
        answer = four_letter_word(s.client_port, "cons") if s.alive else None
        if answer and marker in answer:
            return s
    raise AssertionError(f"no server has session 0x{session_id:x}")


# -- ZooKeeper specifics (the shared semantics: test_store_semantics.py)


def test_large_subtrees_are_deleted_in_chunks(store, monkeypatch):
    monkeypatch.setattr(zk_store, "ATOMIC_DELETE_LIMIT", 4)
    monkeypatch.setattr(zk_store, "_DELETE_CHUNK", 3)
    for p in range(6):
        store.create(f"/topic/partitions/{p}/state", b"{}", makepath=True)
    with pytest.raises(BadVersionError):
        store.delete("/topic", version=7, recursive=True)
    assert len(store.get_children("/topic/partitions")) == 6
    store.delete("/topic", version=0, recursive=True)
    assert store.exists("/topic") is None


def test_sequential_numbers_count_creations_only(store):
    store.create("/changes")
    first = store.create("/changes/config_change_", b"1", sequential=True)
    second = store.create("/changes/config_change_", b"2", sequential=True)
    assert first == "/changes/config_change_0000000000"
    assert second == "/changes/config_change_0000000001"
    store.delete(first)
    assert store.exists("/changes").cversion == 3  # Stat.cversion counts creations and deletions
    third = store.create("/changes/config_change_", b"3", sequential=True)
    # ...but ZooKeeper numbers sequential nodes by the creations alone (its internal counter;
    # Stat.cversion is reported as 2 * creations - children).
    assert third == "/changes/config_change_0000000002"
    assert store.exists("/changes").cversion == 4


# -- connection string, chroot, timeouts


def test_connect_string_parsing():
    assert parse_connect("h1:2181,h2:2181") == ("h1:2181,h2:2181", None)
    assert parse_connect("h1:2181,h2:2181/kafka") == ("h1:2181,h2:2181", "/kafka")
    assert parse_connect("h1:2181/a/b/") == ("h1:2181", "/a/b")
    assert parse_connect("h1:2181/") == ("h1:2181", None)
    with pytest.raises(ValueError):
        parse_connect("/kafka")
    with pytest.raises(ValueError):
        parse_connect("h1:2181/a//b")


def test_chroot_is_created_and_paths_are_relative(zk_ensemble, chroot):
    deep = chroot + "/kafka/cluster1"
    with ZkStore(zk_ensemble.connect_string(deep), session_timeout_ms=SESSION_MS) as store:
        rec = Recorder()
        store.create("/brokers/ids", makepath=True)
        store.get_children("/brokers/ids", watch=rec)
        assert store.create("/brokers/ids/1", b"{}", ephemeral=True) == "/brokers/ids/1"
        store.wait_for_watches()
        assert rec.pairs() == [(EventType.CHILD, "/brokers/ids")]
        assert store.get_children("/") == ["brokers"]
        with ZkStore(zk_ensemble.connect_string(), session_timeout_ms=SESSION_MS) as root:
            assert root.get(deep + "/brokers/ids/1")[0] == b"{}"
            assert root.get_children(chroot + "/kafka") == ["cluster1"]


def test_from_broker_config(zk_ensemble, chroot):
    config = load_config(
        None,
        [
            f"zookeeper.connect={zk_ensemble.connect_string(chroot)}",
            "zookeeper.session.timeout.ms=7000",
            "log.dirs=/tmp/unused",
        ],
    )
    with ZkStore.from_config(config) as store:
        assert store.chroot == chroot and store.session_timeout_ms == 7000
        assert store.exists("/") is not None


def test_connection_timeout():
    (port,) = free_ports(1)
    with pytest.raises(ConnectionTimeoutError):
        ZkStore(f"127.0.0.1:{port}", connection_timeout_ms=500)


# -- failures of the ensemble


def test_store_keeps_working_when_its_server_is_killed(zk_ensemble, store, open_store):
    """Kill -9 the server the session is on: the session survives on another server, calls go
    on, ephemeral nodes stay, and watches armed before the failure still fire exactly once,
    including for a change made while the store was disconnected."""
    other = open_store()
    store.create("/eph", b"mine", ephemeral=True)
    store.create("/w", b"0")
    store.create("/kids")
    changed, created, kids, untouched = Recorder(), Recorder(), Recorder(), Recorder()
    store.get("/w", watch=changed)
    store.exists("/later", watch=created)
    store.get_children("/kids", watch=kids)
    store.create("/quiet")
    store.get("/quiet", watch=untouched)
    session = store.session_id
    victim = server_of(zk_ensemble, session)
    if server_of(zk_ensemble, other.session_id) is victim:
        other.close()
        other = open_store()  # only needs to reach the servers still up
    with zk_ensemble.server_down(victim):
        # Changes made by another session right away, typically before the store reconnected.
        other.set("/w", b"1")
        other.create("/later")
        other.create("/kids/a")
        for i in range(20):
            store.create(f"/during-{i}", str(i).encode())
        assert store.session_id == session
        assert server_of(zk_ensemble, session) is not victim
        assert store.get("/eph")[0] == b"mine"
        assert store.exists("/eph").ephemeral_owner == session
        store.wait_for_watches()
        assert changed.pairs() == [(EventType.CHANGED, "/w")]
        assert created.pairs() == [(EventType.CREATED, "/later")]
        assert kids.pairs() == [(EventType.CHILD, "/kids")]
        assert untouched.events == []
        other.set("/quiet", b"now")  # the re-armed watch fires for a later change
        store.wait_for_watches()
        assert untouched.pairs() == [(EventType.CHANGED, "/quiet")]
        other.set("/w", b"2")  # one-shot: no second event
        store.wait_for_watches()
        assert changed.pairs() == [(EventType.CHANGED, "/w")]
    assert store.get_children("/") == sorted(
        ["eph", "w", "kids", "later", "quiet"] + [f"during-{i}" for i in range(20)]
    )


def test_changes_missed_while_disconnected_fire_the_watches(zk_ensemble, chroot, store):
    """A session that knows only one server stays disconnected while that server is down, so the
    changes below certainly happen while it cannot see them. After the server returns, the session
    is the same, the call made during the outage completes, and each lost watch fires once."""
    only = zk_ensemble.servers[0]
    lonely = ZkStore(f"{only.address}{chroot}", session_timeout_ms=30000)
    try:
        for path in ("/w", "/gone", "/kids", "/quiet"):
            store.create(path, b"0")
        changed, created, deleted, kids, quiet = (Recorder() for _ in range(5))
        lonely.get("/w", watch=changed)
        lonely.exists("/later", watch=created)
        lonely.get("/gone", watch=deleted)
        lonely.get_children("/kids", watch=kids)
        lonely.get("/quiet", watch=quiet)
        session = lonely.session_id
        done = threading.Event()
        with zk_ensemble.server_down(only):
            store.set("/w", b"1")
            store.create("/later")
            store.delete("/gone")
            store.create("/kids/a")
            blocked = threading.Thread(
                target=lambda: (lonely.set("/quiet", b"from lonely"), done.set())
            )
            blocked.start()
            wait_until(lambda: not lonely.connected, WAIT, interval=0.05, what="the disconnection")
        blocked.join(WAIT)
        assert done.is_set() and lonely.session_id == session
        lonely.wait_for_watches()
        assert changed.pairs() == [(EventType.CHANGED, "/w")]
        assert created.pairs() == [(EventType.CREATED, "/later")]
        assert deleted.pairs() == [(EventType.DELETED, "/gone")]
        assert kids.pairs() == [(EventType.CHILD, "/kids")]
        # Its own write after the reconnect fires the re-armed watch like any change.
        assert quiet.pairs() == [(EventType.CHANGED, "/quiet")]
        store.set("/w", b"2")
        lonely.wait_for_watches()
        assert len(changed.events) == 1
    finally:
        lonely.close()


def test_store_keeps_working_when_the_leader_is_killed(zk_ensemble, store):
    store.create("/counter", b"0")
    leader = zk_ensemble.leader()
    with zk_ensemble.server_down(leader):
        # Followers drop their clients while they elect a new leader; calls wait and go on.
        for i in range(1, 51):
            store.set("/counter", str(i).encode(), version=i - 1)
        assert zk_ensemble.leader() is not leader
    data, stat = store.get("/counter")
    assert data == b"50" and stat.version == 50


def test_session_expiry_runs_the_listeners_and_a_new_session_works(zk_ensemble, store, open_store):
    """The broker's pattern: re-register the ephemeral node and re-read (re-watch) on a new
    session. Watches of the old session are gone; the new session works normally."""
    calls: list[tuple[str, int]] = []
    reregistered = threading.Event()

    def expired(old: int) -> None:
        calls.append(("expired", old))

    def new_session(sid: int) -> None:
        calls.append(("new", sid))
        broker.create("/brokers/ids/1", b"again", ephemeral=True)
        broker.get_children("/brokers/ids", watch=after)
        reregistered.set()

    broker = open_store(on_session_expired=expired, on_new_session=new_session)
    observer = open_store()
    before, after, gone = Recorder(), Recorder(), Recorder()
    broker.create("/brokers/ids/1", b"first", ephemeral=True, makepath=True)
    broker.exists("/somewhere", watch=before)
    observer.exists("/brokers/ids/1", watch=gone)
    old = broker.session_id

    zk_ensemble.expire_session(old, broker.session_password)
    assert reregistered.wait(WAIT), "the new-session listener did not run"
    new = broker.session_id
    assert new != old
    assert calls == [("expired", old), ("new", new)]
    observer.wait_for_watches()
    assert gone.pairs() == [(EventType.DELETED, "/brokers/ids/1")]
    data, stat = observer.get("/brokers/ids/1")
    assert data == b"again" and stat.ephemeral_owner == new

    observer.create("/somewhere")  # the old session's watch is not delivered
    observer.create("/brokers/ids/2")  # the new session's watch is
    broker.wait_for_watches()
    assert before.events == []
    assert after.pairs() == [(EventType.CHILD, "/brokers/ids")]
    broker.set("/somewhere", b"ok", version=0)
    broker.close()
    assert observer.exists("/brokers/ids/1") is None


def test_change_notifications_are_followed_again_after_a_session_expiry(zk_ensemble, open_store):
    """The expiry drops the listener's watch: it reads its root again on the new session and
    watches anew, so a change announced afterwards is still handled (config, ACL and token
    changes all go through this listener)."""
    store, writer = open_store(), open_store()
    root = "/acl_changes"

    def announce(data: bytes) -> None:
        writer.create(f"{root}/change_", data, sequential=True, makepath=True)

    async def scenario() -> list[bytes]:
        handled: list[bytes] = []
        seen = asyncio.Event()

        async def handle(data: bytes) -> None:
            handled.append(data)
            seen.set()

        async def next_one() -> None:
            await asyncio.wait_for(seen.wait(), WAIT)
            seen.clear()

        listener = ChangeNotificationListener(KafkaZk(store), root, "change_", handle, what="test")
        await asyncio.to_thread(announce, b"before")
        await listener.start()
        await next_one()
        old = store.session_id
        await asyncio.to_thread(zk_ensemble.expire_session, old, store.session_password)
        await asyncio.to_thread(wait_until, lambda: store.connected and store.session_id != old)
        await asyncio.to_thread(announce, b"after")
        await next_one()
        await listener.stop()
        return handled

    assert asyncio.run(scenario()) == [b"before", b"after"]
