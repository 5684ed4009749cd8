"""Where a follower truncates its log after comparing leader epochs with the leader (KIP-101,
KIP-279, reference §3.5). Pure: the caller asks the leader and applies the answer."""

from __future__ import annotations

from typing import NamedTuple

from ..storage.leader_epoch import LeaderEpochCache

UNDEFINED = -1


class Truncation(NamedTuple):
    offset: int
    # True: the logs agree up to `offset`, fetch from there. False: truncate, then ask the
    # leader again with the follower's (new) latest epoch.
    done: bool


def truncation_for(
    leader_epoch: int,
    leader_end_offset: int,
    local: LeaderEpochCache,
    log_end_offset: int,
    high_watermark: int,
) -> Truncation:
    """Apply the leader's answer (epoch, end offset) for the follower's latest epoch."""
    if leader_end_offset == UNDEFINED:
        return Truncation(min(high_watermark, log_end_offset), True)
    if leader_epoch == UNDEFINED:
        return Truncation(min(leader_end_offset, log_end_offset), True)
    local_epoch, local_end = local.end_offset_for(leader_epoch, log_end_offset)
    if local_epoch == UNDEFINED:
        # The follower has no entry at or below the leader's epoch.
        return Truncation(min(leader_end_offset, log_end_offset), True)
    if local_epoch != leader_epoch:
        return Truncation(min(local_end, log_end_offset), False)
    return Truncation(min(local_end, leader_end_offset, log_end_offset), True)
