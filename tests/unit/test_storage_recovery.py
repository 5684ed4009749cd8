"""Crash recovery and index rebuilding, on real files."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from odradek.broker.records import batch as rb
from odradek.broker.records.record import Record, build_batch
from odradek.broker.storage import LogConfig, LogManager
from odradek.broker.storage.checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    RECOVERY_POINT_CHECKPOINT,
    read_offset_checkpoint,
    write_offset_checkpoint,
)

CONFIG = LogConfig(segment_bytes=1000, index_interval_bytes=150)


def make_batch(n: int = 2, ts: int = 1000) -> bytearray:
    return bytearray(
        build_batch([Record(offset=i, timestamp=ts + i, value=b"r" * 30) for i in range(n)])
    )


BATCH_SIZE = len(make_batch())


def populate(log_dir, batches: int = 30) -> list[int]:
    """A cleanly shut down log dir holding topic-0; returns the segment base offsets."""
    manager = LogManager([log_dir], CONFIG)
    manager.startup()
    log = manager.get_or_create_log("topic", 0)
    for i in range(batches):
        log.append(make_batch(ts=1000 + i * 10))
    bases = [s.base_offset for s in log.segments]
    manager.shutdown()
    return bases


def simulate_crash(log_dir, recovery_point: int | None = 0) -> None:
    """What a kill -9 leaves: no clean-shutdown marker, an older recovery point."""
    os.unlink(log_dir / CLEAN_SHUTDOWN_FILE)
    if recovery_point is not None:
        write_offset_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT, {("topic", 0): recovery_point})


def segment_file(log_dir, base: int, suffix: str = ".log"):
    return log_dir / "topic-0" / f"{base:020d}{suffix}"


def restart(log_dir) -> tuple[LogManager, object]:
    manager = LogManager([log_dir], CONFIG)
    manager.startup()
    return manager, manager.get_log("topic", 0)


def all_base_offsets(log) -> list[int]:
    data = log.read(log.log_start_offset, 1 << 30, max_offset=None)
    out = []
    for seg in log.segments:
        out += [h.base_offset for _, h in seg.iter_headers()]
    assert data is not None
    return out


def test_recovery_truncates_partial_batch_and_continues(tmp_path):
    bases = populate(tmp_path)
    last = segment_file(tmp_path, bases[-1])
    size = os.path.getsize(last)
    os.truncate(last, size - BATCH_SIZE // 2)  # the last batch was half written
    simulate_crash(tmp_path, recovery_point=bases[-1])
    manager, log = restart(tmp_path)
    assert log.log_end_offset == 58
    assert os.path.getsize(last) == size - BATCH_SIZE
    assert all_base_offsets(log) == list(range(0, 58, 2))
    assert log.append(make_batch()).first_offset == 58
    manager.shutdown()
    manager, log = restart(tmp_path)
    assert log.log_end_offset == 60
    manager.shutdown()


def test_recovery_after_corrupted_byte_truncates_at_that_batch(tmp_path):
    bases = populate(tmp_path)
    assert len(bases) >= 4
    target = segment_file(tmp_path, bases[1])
    bad_batch = 3  # the fourth batch of the second segment
    with open(target, "r+b") as f:
        f.seek(bad_batch * BATCH_SIZE + rb.HEADER_SIZE + 5)  # a byte inside its records
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    simulate_crash(tmp_path, recovery_point=0)
    manager, log = restart(tmp_path)
    end = bases[1] + 2 * bad_batch
    assert log.log_end_offset == end
    assert [s.base_offset for s in log.segments] == bases[:2]
    assert not segment_file(tmp_path, bases[2]).exists()
    assert os.path.getsize(target) == bad_batch * BATCH_SIZE
    assert log.read(end - 1, 1 << 20) is not None
    assert log.append(make_batch()).first_offset == end
    assert all_base_offsets(log) == list(range(0, end + 2, 2))
    manager.shutdown()


def test_recovery_skips_segments_before_recovery_point(tmp_path):
    bases = populate(tmp_path)
    # damage below the recovery point is not looked at (it was flushed before the crash)
    with open(segment_file(tmp_path, bases[0]), "r+b") as f:
        f.seek(rb.HEADER_SIZE + 2)
        f.write(b"\x00\xff")
    simulate_crash(tmp_path, recovery_point=bases[2])
    manager, log = restart(tmp_path)
    assert log.log_end_offset == 60
    assert log.recovery_point == bases[2]
    manager.shutdown()


def append_then_kill(log_dir, batches: int, config: str) -> None:
    """Append one-record batches in a real process (LogConfig(`config`)), flushing and
    checkpointing the recovery point after the 11th, then exit without closing anything."""
    script = textwrap.dedent(
        f"""
        import os
        from odradek.broker.records.record import Record, build_batch
        from odradek.broker.storage import LogConfig, LogManager
        manager = LogManager([{str(log_dir)!r}], LogConfig({config}))
        manager.startup()
        log = manager.get_or_create_log("topic", 0)
        for i in range({batches}):
            log.append(bytearray(build_batch([Record(offset=0, timestamp=1000 + i, value=b"r" * 30)])))
            if i == 10:
                log.flush()
                manager.checkpoint_recovery_points()
        os._exit(0)
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True)


def test_recovery_after_kill_of_a_real_process(tmp_path):
    append_then_kill(tmp_path, 25, "segment_bytes=1000, index_interval_bytes=150")
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {("topic", 0): 11}
    manager, log = restart(tmp_path)
    assert log.log_end_offset == 25
    assert log.recovery_point == 11
    # the active segment's index was preallocated and never trimmed: recovery rebuilt it
    active = log.active_segment
    assert active.offset_index.entries == len(
        [1 for i in range(active.offset_index.entries) if active.offset_index.entry_at(i)[1] > 0]
    )
    for offset in range(25):
        sl = log.read(offset, 1)
        assert rb.parse_header(sl.read()).base_offset == offset
    manager.shutdown()


def test_missing_indexes_are_rebuilt_identically(tmp_path):
    bases = populate(tmp_path)
    originals = {
        (b, s): segment_file(tmp_path, b, s).read_bytes()
        for b in bases
        for s in (".index", ".timeindex")
    }
    assert any(originals[(b, ".index")] for b in bases)
    segment_file(tmp_path, bases[0], ".index").unlink()
    segment_file(tmp_path, bases[1], ".timeindex").unlink()
    segment_file(tmp_path, bases[-1], ".index").unlink()
    manager, log = restart(tmp_path)
    for offset in range(0, 60, 3):
        assert rb.parse_header(log.read(offset, 1).read()).last_offset >= offset
    assert log.offset_for_timestamp(1105).offset == 22
    manager.shutdown()
    for (b, s), data in originals.items():
        assert segment_file(tmp_path, b, s).read_bytes() == data, (b, s)


def test_garbage_indexes_are_rebuilt(tmp_path):
    bases = populate(tmp_path)
    good = segment_file(tmp_path, bases[1], ".index").read_bytes()
    good_time = segment_file(tmp_path, bases[2], ".timeindex").read_bytes()
    segment_file(tmp_path, bases[1], ".index").write_bytes(os.urandom(len(good)))
    segment_file(tmp_path, bases[2], ".timeindex").write_bytes(b"\xff" * 24)
    segment_file(tmp_path, bases[0], ".index").write_bytes(b"\x00" * 13)  # partial entry
    # the active segment's index points past the end of the log
    segment_file(tmp_path, bases[-1], ".index").write_bytes(
        bytes(8) + (1000).to_bytes(4, "big") + (0).to_bytes(4, "big")
    )
    manager, log = restart(tmp_path)
    assert log.log_end_offset == 60
    for offset in range(60):
        header = rb.parse_header(log.read(offset, 1).read())
        assert header.base_offset <= offset <= header.last_offset
    manager.shutdown()
    assert segment_file(tmp_path, bases[1], ".index").read_bytes() == good
    assert segment_file(tmp_path, bases[2], ".timeindex").read_bytes() == good_time


def test_orphan_and_temporary_files_are_removed(tmp_path):
    bases = populate(tmp_path)
    orphan = segment_file(tmp_path, 999_999, ".index")
    orphan.write_bytes(b"")
    leftover = segment_file(tmp_path, bases[0], ".log.deleted")
    leftover.write_bytes(b"junk")
    manager, log = restart(tmp_path)
    assert not orphan.exists() and not leftover.exists()
    assert log.log_end_offset == 60
    manager.shutdown()


def test_unclean_start_with_empty_directory_of_a_log(tmp_path):
    (tmp_path / "topic-0").mkdir()
    manager, log = restart(tmp_path)
    assert log.log_end_offset == 0 and len(log.segments) == 1
    assert log.append(make_batch()).first_offset == 0
    manager.shutdown()


def test_recovery_below_the_log_start_offset_restarts_the_log_there(tmp_path):
    manager = LogManager([tmp_path], CONFIG)
    manager.startup()
    log = manager.get_or_create_log("topic", 0)
    for i in range(30):
        log.append(make_batch(ts=1000 + i))
    log.delete_records_before(50)
    first_base = log.segments[0].base_offset
    manager.shutdown()
    assert first_base < 50
    with open(segment_file(tmp_path, first_base), "r+b") as f:
        f.seek(rb.HEADER_SIZE + 1)
        f.write(b"\xee\xee")
    simulate_crash(tmp_path, recovery_point=0)
    manager, log = restart(tmp_path)
    assert (log.log_start_offset, log.log_end_offset) == (50, 50)
    assert log.read(50, 100) is None
    assert log.append(make_batch()).first_offset == 50
    manager.shutdown()


def test_index_entries_not_flushed_before_a_kill_are_rebuilt(tmp_path):
    """The active index is written at flush: a kill loses the later entries from the file, and
    the recovery of the segments past the recovery point brings them back."""
    append_then_kill(tmp_path, 40, "index_interval_bytes=150")
    index = segment_file(tmp_path, 0, ".index").read_bytes()
    on_disk = [index[i : i + 8] for i in range(0, len(index), 8) if index[i : i + 8].strip(b"\0")]
    manager, log = restart(tmp_path)
    assert log.log_end_offset == 40
    rebuilt = log.active_segment.offset_index
    assert 0 < len(on_disk) < rebuilt.entries
    assert [rebuilt.raw_entry(i) for i in range(len(on_disk))] == [
        (int.from_bytes(e[:4], "big"), int.from_bytes(e[4:], "big")) for e in on_disk
    ]
    for offset in range(40):
        assert rb.parse_header(log.read(offset, 1).read()).base_offset == offset
    manager.shutdown()


def test_short_active_index_after_a_clean_shutdown(tmp_path):
    bases = populate(tmp_path, batches=34)
    active = segment_file(tmp_path, bases[-1], ".index")
    good = active.read_bytes()
    assert len(good) >= 16
    os.truncate(active, 8)  # entries lost: a sparser index, still right
    manager, log = restart(tmp_path)
    for offset in range(68):
        assert rb.parse_header(log.read(offset, 1).read()).last_offset >= offset
    manager.shutdown()
    os.truncate(active, 13)  # a partial entry: rebuilt
    manager, log = restart(tmp_path)
    assert log.active_segment.offset_index.entries == len(good) // 8
    manager.shutdown()
    assert active.read_bytes() == good
