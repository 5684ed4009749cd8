"""The embedded metadata store: ZooKeeper semantics, watches, transactions, durability."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading

import pytest
from odradek.broker.cluster.embedded_store import TXN_LOG, EmbeddedStore, StoreLockedError
from odradek.broker.cluster.metadata_store import (
    BadVersionError,
    CheckOp,
    CreateOp,
    DeleteOp,
    EventType,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SetOp,
    Stat,
    StoreClosedError,
    WatchedEvent,
)


@pytest.fixture
def store(tmp_path):
    s = EmbeddedStore(str(tmp_path / "meta"))
    yield s
    s.close()


class Recorder:
    """A watch callback that records events and the thread it ran on."""

    def __init__(self) -> None:
        self.events: list[WatchedEvent] = []
        self.threads: set[str] = set()

    def __call__(self, event: WatchedEvent) -> None:
        self.events.append(event)
        self.threads.add(threading.current_thread().name)


# -- basic operations


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
    with pytest.raises(NoNodeError):
        store.create("/x/y")
    store.create("/x/y/z", b"", makepath=True)
    with pytest.raises(NodeExistsError):
        store.create("/x/y")
    store.create("/x/a")
    assert store.get_children("/x") == ["a", "y"]
    assert store.exists("/x").num_children == 2
    with pytest.raises(NotEmptyError):
        store.delete("/x")
    store.delete("/x", recursive=True)
    assert store.exists("/x") is None
    assert store.get_children("/") == []
    for bad in ("x", "/x/", "//x", "/x/../y"):
        with pytest.raises(ValueError):
            store.create(bad)


def test_sequential_nodes_use_the_parent_counter(store):
    store.create("/changes")
    first = store.create("/changes/config_change_", b"1", sequential=True)
    second = store.create("/changes/config_change_", b"2", sequential=True)
    assert first == "/changes/config_change_0000000000"
    assert second == "/changes/config_change_0000000001"
    store.delete(first)
    third = store.create("/changes/config_change_", b"3", sequential=True)
    assert third == "/changes/config_change_0000000003"  # deletions count too (cversion)


def test_ephemeral_nodes_belong_to_their_session(store):
    other = store.new_session()
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
    assert info.value.op_index == 2
    assert store.exists("/new") is None
    assert store.get("/epoch") == (b"1", store.exists("/epoch"))
    assert store.exists("/epoch").version == 0
    results = store.multi(
        [
            CheckOp("/epoch", 0),
            CreateOp("/p"),
            CreateOp("/p/seq-", b"s", sequential=True),
            SetOp("/epoch", b"2"),
            DeleteOp("/p/seq-0000000000"),
        ]
    )
    assert results[0] is True and results[1] == "/p" and results[2] == "/p/seq-0000000000"
    assert isinstance(results[3], Stat) and results[3].version == 1
    assert store.get_children("/p") == []


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
    assert [(e.type, e.path) for e in rec.events] == [
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
    assert [(e.type, e.path) for e in rec.events] == [
        (EventType.CHILD, "/t"),
        (EventType.CHILD, "/t"),
        (EventType.DELETED, "/t"),
    ]


def test_watch_sees_the_change_and_may_call_the_store(store):
    seen = []

    def callback(event: WatchedEvent) -> None:
        seen.append(store.get(event.path)[0])
        store.get(event.path, watch=callback)  # re-register from inside the callback

    store.create("/c", b"0")
    store.get("/c", watch=callback)
    store.set("/c", b"1")
    store.set("/c", b"2")
    store.wait_for_watches()
    assert seen[0] in (b"1", b"2") and seen[-1] == b"2"


def test_ephemeral_expiry_fires_watches_of_other_sessions(store):
    rec = Recorder()
    broker = store.new_session()
    broker.create("/controller", b"1", ephemeral=True)
    store.exists("/controller", watch=rec)
    broker.create("/ids", b"")
    broker.close()
    store.wait_for_watches()
    assert [(e.type, e.path) for e in rec.events] == [(EventType.DELETED, "/controller")]
    assert store.exists("/ids") is not None


def test_closed_session_drops_its_watches(store):
    rec = Recorder()
    other = store.new_session()
    other.exists("/later", watch=rec)
    other.close()
    store.create("/later")
    store.wait_for_watches()
    assert rec.events == []


# -- durability


def test_reopen_keeps_persistent_and_drops_ephemeral(tmp_path):
    path = str(tmp_path / "meta")
    s = EmbeddedStore(path)
    s.create("/a/b", b"payload", makepath=True)
    s.set("/a/b", b"v1")
    s.create("/seq/n-", b"", sequential=True, makepath=True)
    s.create("/eph", b"", ephemeral=True)
    zxid = s.exists("/a/b").mzxid
    s.close()
    s = EmbeddedStore(path)
    try:
        data, stat = s.get("/a/b")
        assert data == b"v1" and stat.version == 1 and stat.mzxid == zxid
        assert s.exists("/eph") is None
        assert s.create("/seq/n-", sequential=True) == "/seq/n-0000000001"
        assert s.create("/later").startswith("/later")
        assert s.exists("/later").czxid > zxid  # zxids keep growing across restarts
    finally:
        s.close()


def test_directory_is_locked_while_open(tmp_path):
    path = str(tmp_path / "meta")
    s = EmbeddedStore(path)
    try:
        with pytest.raises(StoreLockedError):
            EmbeddedStore(path)
    finally:
        s.close()
    EmbeddedStore(path).close()


def test_torn_log_tail_is_discarded(tmp_path):
    path = str(tmp_path / "meta")
    s = EmbeddedStore(path)
    s.create("/kept", b"1")
    s.close()
    with open(os.path.join(path, TXN_LOG), "ab") as f:
        f.write(b"\x00\x00\x01\x00garbage")  # a record header promising more than exists
    s = EmbeddedStore(path)
    try:
        assert s.get("/kept")[0] == b"1"
        s.create("/after", b"2")
    finally:
        s.close()
    s = EmbeddedStore(path)
    try:
        assert s.get("/after")[0] == b"2"
    finally:
        s.close()


def test_log_records_already_in_the_snapshot_are_not_replayed(tmp_path):
    """A crash between writing the snapshot and truncating the log leaves old records."""
    path = str(tmp_path / "meta")
    s = EmbeddedStore(path)
    s.create("/a", b"1")
    s.set("/a", b"2")
    s.close()
    saved = tmp_path / "txn.log.saved"
    shutil.copy(os.path.join(path, TXN_LOG), saved)
    EmbeddedStore(path).close()  # folds the log into the snapshot, truncates the log
    shutil.copy(saved, os.path.join(path, TXN_LOG))
    s = EmbeddedStore(path)
    try:
        data, stat = s.get("/a")
        assert data == b"2" and stat.version == 1
    finally:
        s.close()


def test_compaction_during_operation(tmp_path):
    path = str(tmp_path / "meta")
    s = EmbeddedStore(path, compact_bytes=2048)
    s.create("/n")
    for i in range(200):
        s.create(f"/n/{i}", b"x" * 50)
    for i in range(0, 200, 2):
        s.delete(f"/n/{i}")
    assert os.path.getsize(os.path.join(path, TXN_LOG)) <= 2048 + 200
    s.close()
    s = EmbeddedStore(path)
    try:
        assert s.get_children("/n") == sorted(str(i) for i in range(1, 200, 2))
    finally:
        s.close()


_CHILD = textwrap.dedent(
    """
    import sys
    from odradek.broker.cluster.embedded_store import EmbeddedStore
    store = EmbeddedStore(sys.argv[1])
    store.create("/items", b"")
    store.create("/owner", b"", ephemeral=True)
    i = 0
    while True:
        store.create(f"/items/{i:06d}", str(i).encode())
        store.set("/items", str(i).encode())
        print(i, flush=True)
        i += 1
    """
)


def test_every_completed_operation_survives_kill_9(tmp_path):
    path = str(tmp_path / "meta")
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, path], stdout=subprocess.PIPE, text=True)
    completed = -1
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            completed = int(line)
            if completed >= 150:
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    # Lines may still be buffered in the pipe: everything printed was completed.
    assert proc.stdout is not None
    for line in proc.stdout:
        completed = max(completed, int(line))
    assert completed >= 150
    s = EmbeddedStore(path)  # the dead process's lock is gone with it
    try:
        items = s.get_children("/items")
        assert len(items) >= completed + 1
        assert items[: completed + 1] == [f"{i:06d}" for i in range(completed + 1)]
        for i in (0, completed // 2, completed):
            assert s.get(f"/items/{i:06d}")[0] == str(i).encode()
        last = int(s.get("/items")[0])
        assert last >= completed
        assert s.exists("/owner") is None  # ephemeral of the dead session
    finally:
        s.close()
