"""Opening a partition directory: the segments a `Log` starts from, after a clean or a crash.

Loading finishes a cleaner swap a crash interrupted, drops temporary and orphaned files, checks
every segment's indexes (rebuilding those that disagree with the log) and, after an unclean
shutdown, CRC-checks every batch past the recovery point, cutting the log after the last valid
one. Kept apart from `log` because none of it is on the append or read path.
"""

from __future__ import annotations

import bisect
import logging
import os
import re
from pathlib import Path
from typing import NamedTuple

from ..records import batch as rb
from .checkpoint import fsync_dir
from .errors import CorruptIndex
from .log_config import LogConfig
from .segment import CLEANED_SUFFIX, DELETED_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, LogSegment

logger = logging.getLogger(__name__)

_SEGMENT_FILE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex)$")
_TEMP_SUFFIXES = (DELETED_SUFFIX, CLEANED_SUFFIX, ".tmp")


class LoadedSegments(NamedTuple):
    segments: list[LogSegment]  # never empty; the last one is active
    next_offset: int  # the log end offset
    # Base offset of the first segment rebuilt (its .txnindex included), or None.
    recovered_from: int | None
    created: bool  # the directory had no segment: the one returned is new


def load_segments(
    directory: Path,
    config: LogConfig,
    *,
    recovery_point: int,
    log_start_offset: int,
    clean: bool,
    now: int,
) -> LoadedSegments:
    """The segments of `directory`, checked (and recovered past `recovery_point` unless the
    shutdown was `clean`); a new empty segment at `log_start_offset` when there are none."""
    complete_swaps(directory)
    bases: set[int] = set()
    index_files: list[tuple[int, Path]] = []
    for entry in os.scandir(directory):
        name = entry.name
        if name.endswith(_TEMP_SUFFIXES):
            os.unlink(entry.path)
            continue
        match = _SEGMENT_FILE.match(name)
        if match is None:
            continue
        if match.group(2) == LOG_SUFFIX:
            bases.add(int(match.group(1)))
        else:
            index_files.append((int(match.group(1)), Path(entry.path)))
    for base, path in index_files:
        if base not in bases:
            logger.warning("%s: deleting orphaned index file %s", directory, path.name)
            path.unlink()

    ordered = sorted(bases)
    segments: list[LogSegment] = []
    recovered: dict[int, int] = {}
    for i, base in enumerate(ordered):
        seg = LogSegment(directory, base, config, now_ms=now)
        next_base = ordered[i + 1] if i + 1 < len(ordered) else None
        try:
            seg.sanity_check(next_base)
        except CorruptIndex as exc:
            logger.warning("%s: %s; rebuilding the indexes of %d", directory, exc, base)
            recovered[base] = seg.recover(config)
        segments.append(seg)

    if not clean:
        _recover_after(directory, config, segments, recovery_point, recovered)
    recovered_from = min(recovered) if recovered else None

    created = not segments
    if created:
        segments.append(LogSegment(directory, log_start_offset, config, now_ms=now))
    active = segments[-1]
    next_offset = active.read_next_offset()
    if active.base_offset not in recovered:
        try:
            _check_active(active, next_offset)
        except CorruptIndex as exc:
            logger.warning(
                "%s: %s; rebuilding the indexes of %d", directory, exc, active.base_offset
            )
            active.recover(config)
            next_offset = active.read_next_offset()
            base = active.base_offset
            recovered_from = min(recovered_from, base) if recovered_from is not None else base
    active.make_active(config)
    return LoadedSegments(segments, next_offset, recovered_from, created)


def _next_offset_of_file(path: Path, base: int) -> int:
    """One past the last offset of the batches in a segment file (`base` when it has none)."""
    next_offset = base
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        pos = 0
        while pos + rb.HEADER_SIZE <= size:
            header = rb.parse_header(os.pread(fd, rb.HEADER_SIZE, pos))
            next_offset = header.last_offset + 1
            pos += header.size
    finally:
        os.close(fd)
    return next_offset


def complete_swaps(directory: Path) -> None:
    """Finish a cleaner swap a crash interrupted, as Kafka's loader does. A `.log.swap`
    file is a complete, fsynced cleaned segment (renaming it was the commit), so the
    segments whose base offsets fall in its offset range go and it takes its own name;
    index `.swap` files without their log are from a swap that never committed."""
    names = os.listdir(directory)
    swaps = [n for n in names if n.endswith(SWAP_SUFFIX)]
    if not swaps:
        return
    ranges = []
    for name in swaps:
        match = _SEGMENT_FILE.match(name[: -len(SWAP_SUFFIX)])
        if match is not None and match.group(2) == LOG_SUFFIX:
            base = int(match.group(1))
            end = _next_offset_of_file(directory / name, base)
            ranges.append((base, max(end, base + 1)))
    committed = {base for base, _ in ranges}
    for name in names:
        match = _SEGMENT_FILE.match(name)
        if match is not None and any(lo <= int(match.group(1)) < hi for lo, hi in ranges):
            logger.info("%s: deleting %s, replaced by a cleaned segment", directory, name)
            os.unlink(directory / name)
    for name in swaps:
        final = name[: -len(SWAP_SUFFIX)]
        match = _SEGMENT_FILE.match(final)
        if match is None or int(match.group(1)) not in committed:
            logger.info("%s: deleting %s from a swap that never committed", directory, name)
            os.unlink(directory / name)
            continue
        logger.info("%s: completing the interrupted swap of %s", directory, final)
        os.replace(directory / name, directory / final)
    fsync_dir(directory)


def _check_active(seg: LogSegment, next_offset: int) -> None:
    """The last segment's indexes must not point at offsets past the end of the log."""
    if seg.offset_index.entries and seg.offset_index.last_entry()[0] >= next_offset:
        raise CorruptIndex(f"{seg.offset_index.path}: entry past the log end offset")
    if seg.time_index.entries and seg.time_index.last_entry()[1] >= next_offset:
        raise CorruptIndex(f"{seg.time_index.path}: entry past the log end offset")


def _recover_after(
    directory: Path,
    config: LogConfig,
    segments: list[LogSegment],
    recovery_point: int,
    recovered: dict[int, int],
) -> None:
    """CRC-check segments from the one holding the recovery point; cut at the first bad batch
    and drop every later segment. `recovered` maps segments already rebuilt to the bytes
    they lost, and gains the ones recovered here."""
    bases = [s.base_offset for s in segments]
    start = max(bisect.bisect_right(bases, recovery_point) - 1, 0)
    for i in range(start, len(segments)):
        seg = segments[i]
        if seg.base_offset not in recovered:
            recovered[seg.base_offset] = seg.recover(config)
        if recovered[seg.base_offset]:
            for later in segments[i + 1 :]:
                logger.warning(
                    "%s: deleting segment %d after a truncation", directory, later.base_offset
                )
                later.delete_files()
            del segments[i + 1 :]
            break
