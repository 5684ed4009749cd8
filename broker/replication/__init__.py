"""Partitions as leader or follower: ISR, high watermark, follower fetchers, producer state."""
