"""The index: ingestion into Chroma, chunk and sentence tables, the embedding models."""
