"""The metadata-store semantics both backends must share, run against each: the embedded
store (`make run`, tests) and ZkStore on a real three-server ZooKeeper ensemble. What only one
backend has lives beside it: test_zk_store.py (chroot, server failures, session expiry) and
tests/unit/test_cluster_embedded_store.py (its log, snapshot and directory lock).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from odradek.broker.cluster.embedded_store import EmbeddedStore
from odradek.broker.cluster.metadata_store import (
    BadVersionError,
    CheckOp,
    CreateOp,
    DeleteOp,
    EventType,
    MetadataStore,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SetOp,
    Stat,
    StoreClosedError,
    WatchedEvent,
)
from odradek.broker.cluster.zk_store import ZkStore
from watch_recorder import Recorder

SESSION_MS = 6000


@pytest.fixture(params=["embedded", "zookeeper"])
def open_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[], MetadataStore]]:
    """Open sessions on one fresh store of the backend; all are closed at the end."""
    stores: list[MetadataStore] = []

    def factory() -> MetadataStore:
        if request.param == "embedded":
            s = stores[0].new_session() if stores else EmbeddedStore(str(tmp_path / "meta"))
        else:
            ensemble = request.getfixturevalue("zk_ensemble")
            chroot = getattr(factory, "chroot", f"/tests/{uuid.uuid4().hex[:12]}")
            factory.chroot = chroot  # type: ignore[attr-defined]
            s = ZkStore(ensemble.connect_string(chroot), session_timeout_ms=SESSION_MS)
        stores.append(s)
        return s

    yield factory
    for s in reversed(stores):
        s.close()


@pytest.fixture
def store(open_store: Callable[[], MetadataStore]) -> MetadataStore:
    return open_store()


def test_sequential_nodes_are_numbered_in_creation_order(store):
    store.create("/changes")
    first = store.create("/changes/config_change_", b"a", sequential=True)
    second = store.create("/changes/config_change_", b"b", sequential=True)
    store.delete(first)
    third = store.create("/changes/config_change_", b"c", sequential=True)
    assert first == "/changes/config_change_0000000000"
    assert first < second < third  # never reused, even after a deletion
    assert store.get_children("/changes") == [second.rsplit("/", 1)[1], third.rsplit("/", 1)[1]]


def test_create_get_set_delete_versions(store):
    assert store.create("/a", b"one") == "/a"
    data, stat = store.get("/a")
    assert data == b"one" and stat.version == 0 and stat.ephemeral_owner == 0
    stat1 = store.set("/a", b"two", version=0)
    assert stat1.version == 1 and stat1.mzxid > stat.czxid and stat1.czxid == stat.czxid
    with pytest.raises(BadVersionError):
        store.set("/a", b"three", version=0)
    with pytest.raises(BadVersionError):
        store.delete("/a", version=0)
    store.delete("/a", version=1)
    assert store.exists("/a") is None
    with pytest.raises(NoNodeError):
        store.get("/a")
    with pytest.raises(NoNodeError):
        store.set("/a", b"")


def test_parents_children_and_errors(store):
    with pytest.raises(NoNodeError) as info:
        store.create("/x/y")
    assert info.value.path == "/x"
    store.create("/x/y/z", b"", makepath=True)
    with pytest.raises(NodeExistsError):
        store.create("/x/y")
    store.create("/x/a")
    assert store.get_children("/x") == ["a", "y"]
    assert store.exists("/x").num_children == 2
    with pytest.raises(NotEmptyError):
        store.delete("/x")
    with pytest.raises(BadVersionError):
        store.delete("/x", version=3, recursive=True)
    assert store.exists("/x/y/z") is not None  # nothing deleted
    store.delete("/x", recursive=True)
    assert store.exists("/x") is None
    assert store.get_children("/") == []
    with pytest.raises(NoNodeError):
        store.delete("/x", recursive=True)
    for bad in ("x", "/x/", "//x", "/x/../y"):
        with pytest.raises(ValueError):
            store.create(bad)


def test_ephemeral_nodes_belong_to_their_session(store, open_store):
    other = open_store()
    other.create("/brokers/ids/1", b"b1", ephemeral=True, makepath=True)
    stat = store.exists("/brokers/ids/1")
    assert stat.ephemeral_owner == other.session_id != store.session_id
    with pytest.raises(NoChildrenForEphemeralsError):
        store.create("/brokers/ids/1/child")
    other.close()
    assert store.exists("/brokers/ids/1") is None
    assert store.exists("/brokers/ids") is not None
    with pytest.raises(StoreClosedError):
        other.get("/brokers")


def test_multi_is_all_or_nothing(store):
    store.create("/epoch", b"1")
    with pytest.raises(BadVersionError) as info:
        store.multi([CreateOp("/new", b"x"), SetOp("/epoch", b"2", 0), CheckOp("/epoch", 0)])
    assert info.value.op_index == 2 and info.value.path == "/epoch"
    assert store.exists("/new") is None
    assert store.get("/epoch") == (b"1", store.exists("/epoch"))
    assert store.exists("/epoch").version == 0
    with pytest.raises(NoNodeError) as info:
        store.multi([CheckOp("/epoch", -1), CreateOp("/missing/child")])
    assert info.value.op_index == 1 and info.value.path == "/missing"
    results = store.multi(
        [
            CheckOp("/epoch", 0),
            CreateOp("/p"),
            CreateOp("/p/seq-", b"s", sequential=True),
            SetOp("/epoch", b"2"),
            DeleteOp("/p/seq-0000000000"),
            CreateOp("/p/eph", ephemeral=True),
        ]
    )
    assert results[0] is True and results[1] == "/p" and results[2] == "/p/seq-0000000000"
    assert isinstance(results[3], Stat) and results[3].version == 1
    assert results[4] is True and results[5] == "/p/eph"
    assert store.get_children("/p") == ["eph"]
    assert store.exists("/p/eph").ephemeral_owner == store.session_id
    assert store.multi([]) == []


# -- watches


def test_data_watches_are_one_shot_and_run_on_the_store_thread(store):
    rec = Recorder()
    assert store.exists("/w", watch=rec) is None
    store.create("/w", b"0")
    store.get("/w", watch=rec)
    store.get("/w", watch=rec)  # same watcher twice: still one event
    store.set("/w", b"1")
    store.set("/w", b"2")  # no watch left
    store.get("/w", watch=rec)
    store.delete("/w")
    store.wait_for_watches()
    assert rec.pairs() == [
        (EventType.CREATED, "/w"),
        (EventType.CHANGED, "/w"),
        (EventType.DELETED, "/w"),
    ]
    assert threading.current_thread().name not in rec.threads


def test_child_watches(store):
    rec = Recorder()
    store.create("/t")
    assert store.get_children("/t", watch=rec) == []
    store.create("/t/a")
    store.create("/t/b")
    store.set("/t", b"data changes do not fire child watches")
    store.get_children("/t", watch=rec)
    store.delete("/t/a")
    store.delete("/t/b")
    store.get_children("/t", watch=rec)
    store.delete("/t")
    store.wait_for_watches()
    assert rec.pairs() == [
        (EventType.CHILD, "/t"),
        (EventType.CHILD, "/t"),
        (EventType.DELETED, "/t"),
    ]


def test_watchers_of_one_node_each_get_the_event(store):
    first, second = Recorder(), Recorder()
    store.create("/n")
    store.get("/n", watch=first)
    store.exists("/n", watch=second)
    store.set("/n", b"x")
    store.wait_for_watches()
    assert first.pairs() == second.pairs() == [(EventType.CHANGED, "/n")]


def test_watch_sees_the_change_and_may_call_the_store(store):
    seen = []

    def callback(event: WatchedEvent) -> None:
        # Re-register from inside the callback, with the read itself (a read followed by a
        # separate watching read could miss a change between the two).
        seen.append(store.get(event.path, watch=callback)[0])

    store.create("/c", b"0")
    store.get("/c", watch=callback)
    store.set("/c", b"1")
    store.set("/c", b"2")
    store.wait_for_watches()
    assert seen[0] in (b"1", b"2") and seen[-1] == b"2"


def test_ephemeral_expiry_fires_watches_of_other_sessions(store, open_store):
    rec = Recorder()
    broker = open_store()
    broker.create("/controller", b"1", ephemeral=True)
    store.exists("/controller", watch=rec)
    broker.create("/ids", b"")
    broker.close()
    store.wait_for_watches()
    assert rec.pairs() == [(EventType.DELETED, "/controller")]
    assert store.exists("/ids") is not None


def test_closed_session_drops_its_watches(store, open_store):
    rec = Recorder()
    other = open_store()
    other.exists("/later", watch=rec)
    other.close()
    store.create("/later")
    store.wait_for_watches()
    assert rec.events == []
