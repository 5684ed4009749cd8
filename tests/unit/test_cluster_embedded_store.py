"""The embedded metadata store's own durability: its log, snapshots and directory lock (the
semantics it shares with ZooKeeper: tests/integration/test_store_semantics.py)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest
from odradek.broker.cluster.embedded_store import TXN_LOG, EmbeddedStore, StoreLockedError

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
