"""Partitions as leader (and, with the cluster issue, follower): logs, ISR, high watermark."""
