"""Event logs: written, read, listed, summarized, replayed, rerun and shown on the log page."""
