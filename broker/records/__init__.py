"""Record batches and legacy message sets: formats, compression, validation, compaction."""
