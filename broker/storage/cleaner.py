"""The log cleaner's work on one log: Kafka's compaction, on segment files.

A log's segments split into a clean section (compacted before, below the first dirty offset), a
dirty section, and an uncleanable head (the active segment, anything above the high watermark,
segments younger than min.compaction.lag.ms). One cleaning:

1. reads the dirty section and records, for each key, the offset of its last record (the offset
   map: a 16-byte MD5 of the key -> offset, bounded by the dedupe buffer as in Kafka, so a huge
   dirty section is cleaned over several rounds), with where that record sits in its batch, so
   the copy pass goes straight to the records that stay; the worker process reads half the
   segments in a forked process, on the machine's other core, when that cannot change the map;
2. recopies every segment from the log start up to the end of what was mapped, in groups whose
   total fits in one segment, keeping a record only when no later record has its key; tombstones
   (records without a value) are kept until their batch's delete horizon (KIP-534: set, as
   now + delete.retention.ms, the first time a cleaning keeps them) has passed; an idempotent
   producer's last batch and the round's last batch are kept, empty if need be;
3. writes each group as `<base>.log.cleaned` (with its indexes) and hands it to `swap`, which
   puts it into the live log (see `Log.replace_segments`); a refused swap aborts the cleaning.
   The worker process writes the first groups (about half the work) in a forked process, on
   the other core, when no transaction marker lies in the rest (the one state the copy carries
   across groups), and then swaps every group in order.

Transactions (Kafka's rules): cleaning stops at the last stable offset, so every transaction
it sees is decided. Records of aborted transactions (known from the .txnindex entries the task
carries) are removed at once and never enter the offset map; an ABORT marker stays while its
transaction still had records in the round (and its .txnindex entry goes into the cleaned
segment's), a COMMIT marker while its transaction still has records; a marker with nothing left
gets a delete horizon like a tombstone and goes once that has passed.

Everything here works on files and picklable descriptions (`CleanTask`), with no reference to
the live `Log`: it runs in the cleaner's worker process, off the broker's event loop.
"""

from __future__ import annotations

import ctypes
import logging
import os
import pickle
import signal
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from ..records import batch as rb
from ..records.batch import BatchHeader
from ..records.compaction import (
    POSITION_BITS,
    UNKNOWN_POSITION,
    RecordSpan,
    delete_horizon,
    empty_batch,
    index_keys,
    located,
    map_key,
    rebuild_batch,
    scan_records,
    select_records,
    spans_at,
)
from ..records.compression import Codec
from ..records.record import ControlType, batch_body, control_type, decode_records
from .crash_points import crash_point
from .log_config import INT_MAX, LogConfig
from .segment import CLEANED_SUFFIX, BatchAppend, LogSegment, segment_paths
from .txn_index import AbortedTxn

log = logging.getLogger(__name__)

HASH_SIZE = 16  # MD5, Kafka's log.cleaner hash
ENTRY_SIZE = HASH_SIZE + 8  # hash + offset: what Kafka's SkimpyOffsetMap spends per key
MAX_READ_CHUNK = 16 << 20  # how far `read_batches` grows its reads for large batches
# What the copy pass spends on a record it keeps, in bytes of log read past in the same time
# (picking it out, rebuilding its batch, writing it): 64 MiB groups with few records kept took
# 0.025 s each, the one keeping 47,000 records 0.36 s (7.6 us a record, 20 KB of reading).
COPY_COST_PER_RECORD = 16 << 10


class CleaningAborted(Exception):
    """The log changed under the cleaner (truncation, deletion, a move): drop this round."""


@dataclass(frozen=True)
class SegmentRef:
    """One segment of the log as the cleaner sees it when the round starts."""

    base_offset: int
    path: str
    size: int
    index_bytes: int
    time_index_bytes: int
    last_modified_ms: int


@dataclass(frozen=True)
class CleanTask:
    """A round of cleaning of one log: its segments below the first uncleanable offset."""

    topic: str
    partition: int
    directory: str
    segments: tuple[SegmentRef, ...]
    first_dirty_offset: int
    first_uncleanable_offset: int
    config: LogConfig
    now_ms: int
    # producer id -> offset of its last batch in the log (those batches are never removed)
    active_producers: dict[int, int] = field(default_factory=dict)
    # aborted transactions overlapping the segments (from their .txnindex files)
    aborted: tuple[AbortedTxn, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass
class CleanerStats:
    """What one round did (Kafka's CleanerStats, reported by the log line and the metrics)."""

    start: float = field(default_factory=time.monotonic)
    map_done_at: float = 0.0
    end: float = 0.0
    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages: int = 0
    buffer_utilization: float = 0.0

    def add_copy(self, other: CleanerStats) -> None:
        """Count the copy pass's work done by another process on part of the groups."""
        self.bytes_read += other.bytes_read
        self.bytes_written += other.bytes_written
        self.messages_read += other.messages_read
        self.messages_written += other.messages_written
        self.invalid_messages += other.invalid_messages

    @property
    def elapsed_secs(self) -> float:
        return max((self.end or time.monotonic()) - self.start, 1e-9)

    @property
    def elapsed_index_secs(self) -> float:
        return max((self.map_done_at or self.start) - self.start, 0.0)

    def summary(self, name: str, start: int, end: int) -> str:
        mb = 1 << 20
        secs = self.elapsed_secs
        return (
            f"cleaned log {name} (dirty section = [{start}, {end}]): "
            f"{self.bytes_read / mb:.1f} MB of log processed in {secs:.1f} seconds "
            f"({self.bytes_read / mb / secs:.1f} MB/sec); indexed {self.map_bytes_read / mb:.1f} MB "
            f"in {self.elapsed_index_secs:.1f} s; buffer utilization "
            f"{100 * self.buffer_utilization:.1f}%; start size {self.bytes_read / mb:.1f} MB "
            f"({self.messages_read} messages), end size {self.bytes_written / mb:.1f} MB "
            f"({self.messages_written} messages)"
        )


@dataclass
class MapPass:
    """What the map pass learned besides the offset map, which the copy pass needs to pick
    the records that stay; one per round, so nothing carries over from the last one."""

    # the most records of a batch the map pass put in one go
    largest_batch: int = 0
    # base offset -> how many records without a key the map pass read in that batch
    keyless: dict[int, int] = field(default_factory=dict)
    # base offsets of the batches the map pass did not read whole (it filled up)
    unmapped: set[int] = field(default_factory=set)
    # whether the map pass read a batch whose offsets do not rise strictly within its
    # range: the copy pass then reads every batch record by record, as the map's
    # positions may point into the wrong batch
    stray: bool = False
    # the offsets of the records the offset map keeps, set once it is built, and the map's
    # values (those offsets with their records' positions) sorted
    winners: set[int] = field(default_factory=set)
    located: list[int] = field(default_factory=list)
    # the base offset of the first segment the pass read, and that of the last transaction
    # marker it saw in them (-1: none): the copy pass may split where no marker follows
    mapped_from: int = -1
    last_marker: int = -1

    def merge(self, other: MapPass) -> None:
        """Take in what the map pass learned reading another part of the section (the
        batches of the two parts are distinct)."""
        self.largest_batch = max(self.largest_batch, other.largest_batch)
        self.keyless.update(other.keyless)
        self.unmapped |= other.unmapped
        self.stray |= other.stray
        self.last_marker = max(self.last_marker, other.last_marker)


class OffsetMap:
    """key -> offset of its latest record, by the key's MD5 (Kafka's SkimpyOffsetMap semantics:
    `memory` / 24 slots, filled up to `load_factor` of them); a key shorter than a digest is
    filed as itself (`map_key`)."""

    def __init__(self, memory: int, load_factor: float = 0.9) -> None:
        self.slots = max(memory // ENTRY_SIZE, 1)
        self.max_entries = max(int(self.slots * load_factor), 1)
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1

    def clear(self) -> None:
        self._map = {}
        self.latest_offset = -1

    @property
    def size(self) -> int:
        return len(self._map)

    @property
    def full(self) -> bool:
        return len(self._map) >= self.max_entries

    @property
    def utilization(self) -> float:
        return len(self._map) / self.slots

    def put(self, key: bytes, offset: int, position: int = UNKNOWN_POSITION) -> None:
        """File `key`'s record at `offset`, at `position` in its batch's records if known."""
        self._map[map_key(key)] = located(offset, position)

    def put_batch(
        self, buf: bytes, pos: int, end: int, header: BatchHeader, start: int
    ) -> tuple[int, bool] | None:
        """Put the keyed records (at or above offset `start`) of the batch `header` describes,
        filling `buf[pos:end]`, in one go (`index_keys`'s answer); None, with nothing put, when
        they might fill the map."""
        count = header.records_count
        if len(self._map) + count > self.max_entries:
            return None
        return index_keys(
            buf, pos, end, count, header.base_offset, header.last_offset, start, self._map
        )

    def get(self, key: bytes) -> int:
        """The latest offset of `key`, -1 when the map does not know it."""
        value = self._map.get(map_key(key))
        return -1 if value is None else value >> POSITION_BITS

    def latest_offsets(self) -> set[int]:
        """The offsets the map holds: in the section it covers, exactly the records that win
        (looked up by offset, the copy pass needs neither the key nor its hash)."""
        return {v >> POSITION_BITS for v in self._map.values()}

    def located_winners(self) -> list[int]:
        """The map's values (`located` offsets and positions), by offset."""
        return sorted(self._map.values())

    def merge_earlier(self, earlier: OffsetMap) -> None:
        """Take in the map of the part of the section before this map's, with this map's
        offsets winning, as one reading in order would; `earlier` is left empty."""
        merged, earlier._map = earlier._map, {}
        merged.update(self._map)
        self._map = merged
        self.latest_offset = max(self.latest_offset, earlier.latest_offset)


class Throttler:
    """Sleep as needed to keep the cleaner's I/O under `rate` bytes per second (Kafka checks
    its rate every 300 ms)."""

    CHECK_INTERVAL_S = 0.3

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.clock = clock
        self._period_start = clock()
        self._observed = 0.0

    def maybe_throttle(self, observed: int) -> None:
        if self.rate <= 0 or self.rate >= 1e300:
            return
        self._observed += observed
        now = self.clock()
        elapsed = now - self._period_start
        if elapsed < self.CHECK_INTERVAL_S:
            return
        wanted = self._observed / self.rate
        if wanted > elapsed:
            time.sleep(wanted - elapsed)
            now = self.clock()
        self._period_start = now
        self._observed = 0.0


class CleanedTransactions:
    """Where the transactions stand as a pass reads the log in offset order (Kafka's
    CleanedTransactionMetadata); one per pass."""

    def __init__(self, aborted: Sequence[AbortedTxn]) -> None:
        self._pending = sorted(aborted, key=lambda t: t.first_offset)
        self._next = 0
        # producer id -> [its aborted transaction, whether the pass saw records of it]
        self._aborted: dict[int, list] = {}
        self._committed: set[int] = set()
        # aborted transactions whose ABORT marker the pass keeps: the cleaned .txnindex
        self.retained: list[AbortedTxn] = []

    def _open_up_to(self, offset: int) -> None:
        while self._next < len(self._pending) and self._pending[self._next].first_offset <= offset:
            txn = self._pending[self._next]
            self._aborted[txn.producer_id] = [txn, False]
            self._next += 1

    def data_batch(self, header: BatchHeader) -> bool:
        """A data batch read: True when it belongs to an aborted transaction."""
        self._open_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        ongoing = self._aborted.get(header.producer_id)
        if ongoing is not None:
            ongoing[1] = True
            return True
        self._committed.add(header.producer_id)
        return False

    def control_batch(self, header: BatchHeader, body: bytes) -> bool:
        """A marker read: True when its transaction has nothing left, so it may go."""
        self._open_up_to(header.last_offset)
        records = decode_records(body, header.records_count, header.base_offset, 0)
        if not records:
            return True  # already emptied by an earlier cleaning
        kind = control_type(records[0])
        pid = header.producer_id
        if kind == ControlType.ABORT:
            ongoing = self._aborted.pop(pid, None)
            if ongoing is not None and ongoing[1]:
                self.retained.append(ongoing[0])
                return False
            return True
        if kind == ControlType.COMMIT:
            if pid in self._committed:
                self._committed.discard(pid)
                return False
            return True
        return False


def group_segments(
    segments: Sequence[SegmentRef], max_size: int, max_index_size: int, first_uncleanable: int
) -> list[list[SegmentRef]]:
    """Consecutive segments grouped so each group fits one segment (log and index sizes, and
    offsets within int32 of the group's base): cleaning merges what shrank."""
    groups: list[list[SegmentRef]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        size, index, time_index = (
            segments[i].size,
            segments[i].index_bytes,
            segments[i].time_index_bytes,
        )
        i += 1
        while i < len(segments):
            seg = segments[i]
            last = (
                segments[i + 1].base_offset - 1 if i + 1 < len(segments) else first_uncleanable - 1
            )
            if not (
                size + seg.size <= max_size
                and index + seg.index_bytes <= max_index_size
                and time_index + seg.time_index_bytes <= max_index_size
                and (seg.size == 0 or last - group[0].base_offset <= INT_MAX)
            ):
                break
            group.append(seg)
            size += seg.size
            index += seg.index_bytes
            time_index += seg.time_index_bytes
            i += 1
        groups.append(group)
    return groups


def read_batches(
    fd: int, end: int, chunk: int, start: int = 0
) -> Iterator[tuple[bytes, int, BatchHeader]]:
    """(buffer, position in it, header) of each whole batch of a segment file up to `end`,
    read `chunk` bytes at a time. A batch larger than that is read on its own, and the reads
    that follow grow to hold two such batches (Kafka grows its read buffer likewise): producers'
    batches are often larger than the cleaner's buffer, and each would otherwise be read twice."""
    position = start
    while position < end:
        wanted = min(chunk, end - position)
        data = os.pread(fd, wanted, position)
        if len(data) < wanted:
            raise CleaningAborted("a segment changed (shrank) while it was being cleaned")
        if len(data) < rb.HEADER_SIZE:
            raise rb.CorruptRecordError(f"truncated batch at position {position}")
        p = 0
        while p + rb.HEADER_SIZE <= len(data):
            header = rb.parse_header(data, p)
            if p + header.size > len(data):
                break
            yield data, p, header
            p += header.size
        if p == 0:
            header = rb.parse_header(data, 0)
            data = os.pread(fd, header.size, position)
            if len(data) < header.size:
                raise CleaningAborted("a segment changed (shrank) while it was being cleaned")
            yield data, 0, header
            p = header.size
            chunk = max(chunk, min(2 * header.size, MAX_READ_CHUNK))
        position += p


def _records(data: bytes, p: int, header: BatchHeader) -> tuple[bytes, int, int]:
    """Where the records of the batch at `p` of `data` are: (buffer, start, end), in place when
    it is not compressed."""
    if header.compression == Codec.NONE:
        return data, p + rb.HEADER_SIZE, p + header.size
    body = batch_body(data, header, p)
    return body, 0, len(body)


PR_SET_PDEATHSIG = 1


def balanced_split(costs: Sequence[int]) -> int:
    """Where to cut `costs` (at least two) into a first part and the rest so that the larger
    part costs the least: the first part's length."""
    before = list(accumulate(costs))  # before[k - 1]: the cost of the first k
    return min(range(1, len(costs)), key=lambda k: max(before[k - 1], before[-1] - before[k - 1]))


def in_forked_process(work: Callable[[], object]) -> tuple[int, int]:
    """Start `work` in a forked process (the worker's other core), which sends its answer,
    pickled, down a pipe and exits (status 1 if `work` raised); its pid and the pipe's read
    end, which the caller reads to the end and closes, and then waits for the process."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(reader)
            die_with(os.getppid())
            answer = work()
            with os.fdopen(writer, "wb") as out:
                pickle.dump(answer, out, protocol=pickle.HIGHEST_PROTOCOL)
            code = 0
        finally:
            os._exit(code)
    os.close(writer)
    return pid, reader


def die_with(parent: int) -> None:
    """Have the kernel kill this process (the cleaner's worker, or the process it forks) when
    `parent` dies; exit at once if it already has."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)


class _Original:
    """`_filter`'s answer for a batch written as it is."""


_ORIGINAL = _Original()


class Cleaner:
    """One cleaner thread's state: its offset map, I/O buffer size and throttle."""

    def __init__(
        self,
        offset_map: OffsetMap,
        io_buffer_size: int,
        throttler: Throttler,
        *,
        check_done: Callable[[], None] = lambda: None,
        two_cores: bool = False,
    ) -> None:
        self.offset_map = offset_map
        self.io_buffer_size = max(io_buffer_size, rb.HEADER_SIZE)
        self.throttler = throttler
        self.check_done = check_done
        # whether the map and copy passes may fork a process to do half their work on another
        # core (the worker process, single-threaded, may; a cleaner inside the broker may not)
        self.two_cores = two_cores and len(os.sched_getaffinity(0)) > 1

    def clean(
        self, task: CleanTask, swap: Callable[[int, list[int]], bool]
    ) -> tuple[int, CleanerStats]:
        """Clean `task`'s log; `swap(new base, replaced bases)` puts each cleaned group in
        place (False aborts). Returns the next dirty offset and the round's statistics."""
        stats = CleanerStats()
        found = self.build_offset_map(task, CleanedTransactions(task.aborted), stats)
        end_offset = self.offset_map.latest_offset + 1
        stats.map_done_at = time.monotonic()
        crash_point("cleaner-map-built")
        to_clean = [s for s in task.segments if s.base_offset < end_offset]
        groups = group_segments(
            to_clean,
            task.config.segment_bytes,
            task.config.segment_index_bytes,
            task.first_uncleanable_offset,
        )
        split = self._copy_split(task, groups, found)
        if split:
            self._copy_on_two_cores(task, groups, split, found, stats)
            for i, group in enumerate(groups):
                self._swap(task, group, swap, groups[i + 1 :])
        else:
            txn = CleanedTransactions(task.aborted)
            for group in groups:
                self.clean_segments(task, group, found, txn, stats)
                crash_point("cleaner-cleaned-written")
                self._swap(task, group, swap)
        stats.buffer_utilization = self.offset_map.utilization
        stats.end = time.monotonic()
        return end_offset, stats

    # -- the offset map ------------------------------------------------------------------------

    def build_offset_map(
        self, task: CleanTask, txn: CleanedTransactions, stats: CleanerStats
    ) -> MapPass:
        """Fill the offset map from the dirty section; what else the pass learned."""
        start, end = task.first_dirty_offset, task.first_uncleanable_offset
        omap = self.offset_map
        omap.clear()
        segs = task.segments
        dirty = [
            (seg, segs[i + 1].base_offset if i + 1 < len(segs) else end)
            for i, seg in enumerate(segs)
            if seg.base_offset < end and (i + 1 == len(segs) or segs[i + 1].base_offset > start)
        ]
        log.debug("building the offset map of %s over [%d, %d)", task.name, start, end)
        found = self._map_on_two_cores(task, dirty, stats)
        if found is None:
            found = MapPass()
            found.mapped_from = dirty[0][0].base_offset if dirty else -1
            for seg, next_base in dirty:
                self.check_done()
                if self._map_segment(seg, start, next_base, txn, stats, found):
                    log.debug("offset map of %s is full at segment %d", task.name, seg.base_offset)
                    break
        found.winners = omap.latest_offsets()
        found.located = omap.located_winners()
        return found

    def _may_fork(self, task: CleanTask) -> bool:
        """Whether a pass may hand part of its work to a forked process: allowed here, no
        aborted transaction pending (its state runs across segments), no throttle (one rate
        for one process)."""
        return self.two_cores and not task.aborted and not 0 < self.throttler.rate < 1e300

    def _map_on_two_cores(
        self, task: CleanTask, dirty: list[tuple[SegmentRef, int]], stats: CleanerStats
    ) -> MapPass | None:
        """Build the offset map with a forked process reading the first half of the dirty
        segments (by size) while this one reads the second; the halves merge with the later
        offsets winning, as one reading in order would. Only where that reading could not
        differ: no aborted transactions (whose state runs across segments), no throttle, and
        a map that could not have filled up (checked after). None, with the map cleared, when
        it did not apply or did not work out (the caller then reads in order)."""
        if not self._may_fork(task) or len(dirty) < 2:
            return None
        half = balanced_split([seg.size for seg, _ in dirty])
        start = task.first_dirty_offset

        def first_half() -> tuple:
            part, found = CleanerStats(), MapPass()
            txn = CleanedTransactions(())
            full = any(
                self._map_segment(seg, start, nb, txn, part, found) for seg, nb in dirty[:half]
            )
            return full, self.offset_map, found, part.map_bytes_read, part.map_messages_read

        pid, reader = in_forked_process(first_half)
        found = MapPass(mapped_from=dirty[0][0].base_offset)
        with os.fdopen(reader, "rb") as inp:
            try:
                txn = CleanedTransactions(())
                full = any(
                    self._map_segment(seg, start, nb, txn, stats, found) for seg, nb in dirty[half:]
                )
                data = inp.read()
            except BaseException:
                os.kill(pid, signal.SIGKILL)
                raise
            finally:
                status = os.waitpid(pid, 0)[1]
        omap = self.offset_map
        if not full and status == 0 and data:
            first_full, first_map, first, nbytes, msgs = pickle.loads(data)
            omap.merge_earlier(first_map)
            found.merge(first)
            stats.map_bytes_read += nbytes
            stats.map_messages_read += msgs
            # Reading in order, the map holds at most its final keys before any batch: when even
            # that plus the largest batch fits, no batch found it near full, and the map is the
            # same.
            if not first_full and not found.unmapped:
                if omap.size + found.largest_batch <= omap.max_entries:
                    return found
        omap.clear()
        stats.map_bytes_read = stats.map_messages_read = 0
        return None

    def _map_segment(
        self,
        seg: SegmentRef,
        start: int,
        next_base: int,
        txn: CleanedTransactions,
        stats: CleanerStats,
        found: MapPass,
    ) -> bool:
        """Put the keys of one segment into the map, and what else it shows into `found`;
        True when the map filled up."""
        omap = self.offset_map
        fd = os.open(seg.path, os.O_RDONLY)
        try:
            for data, p, header in read_batches(fd, seg.size, self.io_buffer_size):
                stats.map_bytes_read += header.size
                self.throttler.maybe_throttle(header.size)
                if header.is_control:
                    found.last_marker = max(found.last_marker, header.base_offset)
                if header.last_offset < start:
                    continue
                if header.is_control:
                    txn.control_batch(header, batch_body(data, header, p))
                elif not txn.data_batch(header):
                    buf, pos, end = _records(data, p, header)
                    base = header.base_offset
                    read = omap.put_batch(buf, pos, end, header, start)
                    if header.records_count > found.largest_batch:
                        found.largest_batch = header.records_count
                    if read is not None:
                        keyless, stray = read
                        found.stray |= stray
                    else:
                        # Near full: record by record, to stop where it fills up.
                        found.unmapped.add(base)
                        spans, keyless = select_records(
                            buf, pos, end, header.records_count, 0, None
                        )
                        offsets = [base + span.offset_delta for span in spans]
                        found.stray |= any(
                            a >= b for a, b in zip([base - 1, *offsets], offsets, strict=False)
                        ) or bool(offsets and offsets[-1] > header.last_offset)
                        for span, offset in zip(spans, offsets, strict=True):
                            if span.key is not None and offset >= start:
                                if omap.full:
                                    return True
                                omap.put(span.key, offset)
                    if keyless:
                        found.keyless[base] = keyless
                stats.map_messages_read += header.records_count
                omap.latest_offset = max(omap.latest_offset, header.last_offset)
        finally:
            os.close(fd)
        omap.latest_offset = max(omap.latest_offset, next_base - 1)
        return False

    # -- recopying -----------------------------------------------------------------------------

    def _swap(
        self,
        task: CleanTask,
        group: Sequence[SegmentRef],
        swap: Callable[[int, list[int]], bool],
        unswapped: Sequence[Sequence[SegmentRef]] = (),
    ) -> None:
        """Hand one cleaned group to `swap`; when refused, drop its cleaned copy and those of
        the `unswapped` groups written ahead of it, and abort the round."""
        if swap(group[0].base_offset, [s.base_offset for s in group]):
            return
        for g in (group, *unswapped):
            for path in segment_paths(task.directory, g[0].base_offset, CLEANED_SUFFIX):
                path.unlink(missing_ok=True)
        raise CleaningAborted(f"{task.name} changed while it was being cleaned")

    def _copy_split(
        self, task: CleanTask, groups: Sequence[Sequence[SegmentRef]], found: MapPass
    ) -> int:
        """Where the copy pass may split the groups between a forked process (those before)
        and this one (from there on), 0 when it may not. A copy carries one state across
        groups, the transactions' (CleanedTransactions), and reads it only at markers: so the
        second part must hold none (the map pass read all of it and saw none there), and no
        aborted transaction may be pending. The parts take about as long: a group's cost is
        its size plus COPY_COST_PER_RECORD for each record it keeps (the later groups keep
        most of the records: a key's latest record tends to be near the log's end)."""
        if not self._may_fork(task) or len(groups) < 2 or found.unmapped or found.mapped_from < 0:
            return 0
        bounds = [bisect_left(found.located, located(g[0].base_offset, 0)) for g in groups]
        bounds.append(len(found.located))
        costs = [
            sum(s.size for s in g) + COPY_COST_PER_RECORD * (bounds[i + 1] - bounds[i])
            for i, g in enumerate(groups)
        ]
        split = balanced_split(costs)
        first = groups[split][0].base_offset
        if first < found.mapped_from or found.last_marker >= first:
            return 0
        return split

    def _copy_on_two_cores(
        self,
        task: CleanTask,
        groups: Sequence[Sequence[SegmentRef]],
        split: int,
        found: MapPass,
        stats: CleanerStats,
    ) -> None:
        """Write the cleaned copies of `groups`: those before `split` in a forked process,
        the rest in this one, at the same time. If the forked process fails, this one writes
        its groups after all; either way every copy is written, none swapped, on return."""

        def first_groups() -> CleanerStats:
            self.check_done = lambda: None  # the worker checks, and kills this process
            part = CleanerStats()
            txn = CleanedTransactions(())
            for group in groups[:split]:
                self.clean_segments(task, group, found, txn, part)
                crash_point("cleaner-cleaned-written")
            return part

        pid, reader = in_forked_process(first_groups)
        with os.fdopen(reader, "rb") as inp:
            try:
                txn = CleanedTransactions(())
                for group in groups[split:]:
                    self.clean_segments(task, group, found, txn, stats)
                    crash_point("cleaner-cleaned-written")
                data = inp.read()
            except BaseException:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)  # gone before its files are
                for g in groups:
                    for path in segment_paths(task.directory, g[0].base_offset, CLEANED_SUFFIX):
                        path.unlink(missing_ok=True)
                raise
        status = os.waitpid(pid, 0)[1]
        if status == 0 and data:
            stats.add_copy(pickle.loads(data))
            return
        log.warning("%s: the copy pass's forked process failed; writing its part here", task.name)
        txn = CleanedTransactions(())
        for group in groups[:split]:
            self.clean_segments(task, group, found, txn, stats)

    def clean_segments(
        self,
        task: CleanTask,
        group: Sequence[SegmentRef],
        found: MapPass,
        txn: CleanedTransactions,
        stats: CleanerStats,
    ) -> None:
        """Write the cleaned copy of `group` as one `.cleaned` segment, fsynced, keeping the
        records the map pass (`found`, with the offset map) says stay."""
        base = group[0].base_offset
        for path in segment_paths(task.directory, base, CLEANED_SUFFIX):
            path.unlink(missing_ok=True)
        dest = LogSegment(
            task.directory, base, task.config, now_ms=task.now_ms, active=True,
            suffix=CLEANED_SUFFIX,
        )  # fmt: skip
        try:
            txn.retained = []
            for seg in group:
                self._clean_into(task, seg, dest, found, txn, stats)
            for aborted in txn.retained:  # markers kept: their transactions stay indexed
                dest.txn_index.append(aborted)
            dest.on_become_inactive()
            dest.flush()
            dest.close()
            mtime = group[-1].last_modified_ms / 1000
            os.utime(dest.log_path, (mtime, mtime))
        except BaseException:
            dest.delete_files()
            raise

    def _clean_into(
        self,
        task: CleanTask,
        seg: SegmentRef,
        dest: LogSegment,
        found: MapPass,
        txn: CleanedTransactions,
        stats: CleanerStats,
    ) -> None:
        out = bytearray()
        appends: list[BatchAppend] = []
        fd = os.open(seg.path, os.O_RDONLY)
        try:
            for data, p, header in read_batches(fd, seg.size, self.io_buffer_size):
                self.check_done()
                rb.validate(data, p)
                stats.bytes_read += header.size
                self.throttler.maybe_throttle(header.size)
                answer = self._filter(task, data, p, header, found, txn, stats)
                if answer is None:
                    continue
                if isinstance(answer, _Original):
                    kept = data[p : p + header.size]
                    max_ts = header.max_timestamp
                else:
                    kept = answer
                    max_ts = rb.parse_header(kept).max_timestamp
                appends.append(BatchAppend(len(out), len(kept), header.last_offset, max_ts))
                out += kept
                if len(out) >= self.io_buffer_size:
                    self._write(dest, out, appends, stats)
                    out, appends = bytearray(), []
        finally:
            os.close(fd)
        if out:
            self._write(dest, out, appends, stats)

    def _write(
        self, dest: LogSegment, out: bytearray, appends: list[BatchAppend], stats: CleanerStats
    ) -> None:
        dest.append(out, appends)
        stats.bytes_written += len(out)
        self.throttler.maybe_throttle(len(out))
        crash_point("cleaner-cleaned-partial")

    def _filter(
        self,
        task: CleanTask,
        data: bytes,
        p: int,
        header: BatchHeader,
        found: MapPass,
        txn: CleanedTransactions,
        stats: CleanerStats,
    ) -> bytes | _Original | None:
        """What of one batch goes into the cleaned segment: _ORIGINAL (all of it, unchanged),
        new batch bytes, or None (nothing)."""
        retain_empty = (
            header.producer_id >= 0
            and task.active_producers.get(header.producer_id) == header.last_offset
        ) or header.last_offset + 1 == task.first_uncleanable_offset
        if header.is_control:
            body = batch_body(data, header, p)
            stats.messages_read += header.records_count
            if not txn.control_batch(header, body):
                stats.messages_written += header.records_count
                return _ORIGINAL
            # Nothing of its transaction is left: a marker goes once its delete horizon (set
            # by the first cleaning that finds it so) has passed, as tombstones do.
            horizon = delete_horizon(header)
            if horizon is not None and task.now_ms >= horizon:
                return empty_batch(header) if retain_empty else None
            stats.messages_written += header.records_count
            if horizon is not None:
                return _ORIGINAL
            spans = scan_records(body, header.records_count)
            return rebuild_batch(
                header, body, spans,
                delete_horizon_ms=task.now_ms + task.config.delete_retention_ms,
            )  # fmt: skip
        stats.messages_read += header.records_count
        if txn.data_batch(header):  # an aborted transaction's records go at once
            return empty_batch(header) if retain_empty else None
        buf, pos, end = _records(data, p, header)
        kept = self._retained(task, header, buf, pos, end, found, stats)
        if not kept:
            return empty_batch(header) if retain_empty else None
        stats.messages_written += len(kept)
        needs_horizon = delete_horizon(header) is None and any(not s.has_value for s in kept)
        if len(kept) == header.records_count and not needs_horizon:
            return _ORIGINAL
        horizon = task.now_ms + task.config.delete_retention_ms if needs_horizon else None
        return rebuild_batch(header, buf, kept, delete_horizon_ms=horizon)

    def _retained(
        self,
        task: CleanTask,
        header: BatchHeader,
        buf: bytes,
        pos: int,
        end: int,
        found: MapPass,
        stats: CleanerStats,
    ) -> list[RecordSpan]:
        """The records of the batch that stay: the latest of their key, tombstones until
        their delete horizon, everything above what the offset map covers."""
        omap = self.offset_map
        latest = omap.latest_offset
        base = header.base_offset
        horizon = delete_horizon(header)
        deletes_expired = horizon is not None and task.now_ms >= horizon
        count = header.records_count
        if task.first_dirty_offset <= base and header.last_offset <= latest:
            # Wholly in the mapped section: a record stays when the map holds its offset.
            if found.stray or base in found.unmapped:
                kept, keyless = select_records(buf, pos, end, count, base, found.winners)
                stats.invalid_messages += keyless
                return [s for s in kept if s.has_value] if deletes_expired else kept
            # Read whole by the map pass, which counted its keyless records and filed each
            # winner's position: the winners in the batch's range are its records that stay,
            # read where they are; the others are not read again.
            stats.invalid_messages += found.keyless.get(base, 0)
            located_ = found.located
            lo = bisect_left(located_, located(base, 0))
            hi = bisect_left(located_, located(header.last_offset + 1, 0), lo)
            kept = spans_at(buf, pos, located_[lo:hi])
            return [s for s in kept if s.has_value] if deletes_expired else kept
        kept = []
        for span in select_records(buf, pos, end, count, 0, None)[0]:
            offset = base + span.offset_delta
            if offset > latest:
                kept.append(span)
            elif span.key is None:
                stats.invalid_messages += 1
            elif offset >= omap.get(span.key) and (span.has_value or not deletes_expired):
                kept.append(span)
        return kept
