"""What is stored and how it is searched locally: Chroma collection versions (``store``),
the chunk tables beside them (``chunk_table``) with each chunk's sentences
(``chunk_sentences``, split by ``sentences``), the keyword index (``keyword_index``), a
version's local indexes built from the store (``version_index``), the embedding models
(``embeddings``; ``multilingual`` for questions in other languages) and ingestion from
release files into all of these (``ingestion``).
"""

from typing import TYPE_CHECKING

from pipelines.core.lazy import lazy_attributes

# Imported on first use: the store brings Chroma and the models onnxruntime, while the
# sentence splitter a reader of logs needs is pure (the command line starts at once).
if TYPE_CHECKING:
    from pipelines.index.chunk_table import (
        ChunkRecord,
        ChunkTable,
        ChunkTableWriter,
        chunk_heading,
        indexed_text,
    )
    from pipelines.index.embeddings import (
        MINILM_NAME,
        MINILM_Q8_NAME,
        MiniLMEmbeddings,
        make_embeddings,
    )
    from pipelines.index.ingestion import (
        CollectionFiles,
        CollectionSummary,
        chunk_documents,
        ingest,
        locate_files,
        sample_files,
    )
    from pipelines.index.keyword_index import KeywordIndex, keyword_tokens
    from pipelines.index.multilingual import E5_Q8_NAME, E5Embeddings
    from pipelines.index.store import (
        CollectionInfo,
        StoredVersion,
        active_version,
        check_embedding_model,
        collection_infos,
        keyword_index_dir,
        keyword_index_lock,
        new_version_name,
        open_client,
        remove_retired_versions,
        remove_version,
        reopen_client,
        retire_versions,
        retirement_grace_s,
        stale_versions,
        version_named,
    )
    from pipelines.index.version_index import VersionIndex, build_from_store, copy_rows

__all__ = [
    "E5_Q8_NAME",
    "MINILM_NAME",
    "MINILM_Q8_NAME",
    "ChunkRecord",
    "ChunkTable",
    "ChunkTableWriter",
    "CollectionFiles",
    "CollectionInfo",
    "CollectionSummary",
    "E5Embeddings",
    "KeywordIndex",
    "MiniLMEmbeddings",
    "StoredVersion",
    "VersionIndex",
    "active_version",
    "build_from_store",
    "check_embedding_model",
    "chunk_documents",
    "chunk_heading",
    "collection_infos",
    "copy_rows",
    "indexed_text",
    "ingest",
    "keyword_index_dir",
    "keyword_index_lock",
    "keyword_tokens",
    "locate_files",
    "make_embeddings",
    "new_version_name",
    "open_client",
    "remove_retired_versions",
    "remove_version",
    "reopen_client",
    "retire_versions",
    "retirement_grace_s",
    "sample_files",
    "stale_versions",
    "version_named",
]

__getattr__ = lazy_attributes(
    __name__,
    {
        "ChunkRecord": "pipelines.index.chunk_table",
        "ChunkTable": "pipelines.index.chunk_table",
        "ChunkTableWriter": "pipelines.index.chunk_table",
        "CollectionFiles": "pipelines.index.ingestion",
        "CollectionInfo": "pipelines.index.store",
        "CollectionSummary": "pipelines.index.ingestion",
        "E5Embeddings": "pipelines.index.multilingual",
        "E5_Q8_NAME": "pipelines.index.multilingual",
        "KeywordIndex": "pipelines.index.keyword_index",
        "MINILM_NAME": "pipelines.index.embeddings",
        "MINILM_Q8_NAME": "pipelines.index.embeddings",
        "MiniLMEmbeddings": "pipelines.index.embeddings",
        "StoredVersion": "pipelines.index.store",
        "VersionIndex": "pipelines.index.version_index",
        "active_version": "pipelines.index.store",
        "build_from_store": "pipelines.index.version_index",
        "check_embedding_model": "pipelines.index.store",
        "chunk_documents": "pipelines.index.ingestion",
        "chunk_heading": "pipelines.index.chunk_table",
        "collection_infos": "pipelines.index.store",
        "copy_rows": "pipelines.index.version_index",
        "indexed_text": "pipelines.index.chunk_table",
        "ingest": "pipelines.index.ingestion",
        "keyword_index_dir": "pipelines.index.store",
        "keyword_index_lock": "pipelines.index.store",
        "keyword_tokens": "pipelines.index.keyword_index",
        "locate_files": "pipelines.index.ingestion",
        "make_embeddings": "pipelines.index.embeddings",
        "new_version_name": "pipelines.index.store",
        "open_client": "pipelines.index.store",
        "remove_retired_versions": "pipelines.index.store",
        "remove_version": "pipelines.index.store",
        "reopen_client": "pipelines.index.store",
        "retire_versions": "pipelines.index.store",
        "retirement_grace_s": "pipelines.index.store",
        "sample_files": "pipelines.index.ingestion",
        "stale_versions": "pipelines.index.store",
        "version_named": "pipelines.index.store",
    },
)
