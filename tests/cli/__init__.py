"""The installed command line: its options, its start-up, ingest and collections, and the text it
shows."""
