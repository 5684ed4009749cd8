"""Making ZooKeeper expire one broker's session, the way a long GC pause or a frozen VM does."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from cluster import SESSION_TIMEOUT_MS, Cluster


@contextmanager
def session_expired(c: Cluster, victim: int) -> Iterator[None]:
    """SIGSTOP broker `victim` until ZooKeeper drops its registration, run the body while it is
    away, SIGCONT it, and return once it has registered again with a new session (a newer
    czxid, i.e. a new broker epoch)."""
    path = f"/brokers/ids/{victim}"
    czxid = c.zk.exists(path).czxid
    c[victim].pause()
    try:
        c.wait_until(
            lambda: victim not in c.registered(),
            "the paused broker's session to expire",
            timeout=SESSION_TIMEOUT_MS / 1000 * 4 + 30,
        )
        yield
    finally:
        c[victim].resume()

    def reregistered() -> bool:
        found = c.zk.exists(path)
        return found is not None and found.czxid > czxid

    c.wait_until(reregistered, "re-registration with a new broker epoch")
