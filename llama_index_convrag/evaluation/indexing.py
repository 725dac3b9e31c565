"""Index an evaluation corpus (BEIR documents, CAsT passages) into a Milvus collection of our layout.

One row per document: ``id`` = ``doc_id`` = the data set's document id (so retrieved ``ref_doc_id`` values are the
ids the qrels use), ``text`` = :attr:`Document.full_text` (``title + "\\n" + text``), the dense embedding of that
text and an empty metadata object. This is the layout ``bench/retrieval_quality.py`` builds by hand.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from llama_index.core.base.embeddings.base import BaseEmbedding
from pymilvus import MilvusClient

from llama_index_convrag.embeddings.identity import embed_model_id
from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.evaluation.datasets import Document
from llama_index_convrag.milvus.schema import create_collection, default_spec, detect_spec

logger = logging.getLogger(__name__)


def collection_rows(client: MilvusClient, collection_name: str) -> int:
    """Row count of ``collection_name`` (0 when it does not exist)."""
    if not client.has_collection(collection_name):
        return 0
    return int(client.get_collection_stats(collection_name).get("row_count", 0))


def index_corpus(
    corpus: Mapping[str, Document],
    *,
    client: MilvusClient,
    collection_name: str,
    embed_model: BaseEmbedding,
    is_lite: bool = True,
    batch_size: int = 64,
    progress: bool = False,
    rebuild: bool = False,
) -> bool:
    """Make ``collection_name`` hold exactly ``corpus``; returns False when an existing one was reused.

    An existing collection is reused when it has our layout, the model's dimension and as many rows as the corpus
    (the data set is assumed unchanged); any other existing collection is refused with ValueError (it may hold
    someone's data, or an interrupted build) unless ``rebuild=True``, which drops and rebuilds it.
    """
    if batch_size < 1:
        raise ConfigurationError(f"batch_size must be >= 1, got {batch_size!r}")
    if not corpus:
        raise ConfigurationError("corpus is empty: nothing to index")
    dim = len(embed_model.get_text_embedding("dimension probe"))
    if client.has_collection(collection_name) and not rebuild:
        spec = detect_spec(client, collection_name)
        dims = [spec.vector(f).dim for f in spec.dense_fields]
        rows = collection_rows(client, collection_name)
        recorded = spec.embed_model in (None, embed_model_id(embed_model))
        if spec.layout == "convrag" and dims[:1] == [dim] and rows == len(corpus) and recorded:
            logger.info("reusing collection %s (%d rows)", collection_name, len(corpus))
            return False
        raise ConfigurationError(f"collection {collection_name!r} exists with {rows} rows ({spec.layout} layout, dense dim "
                         f"{dims[:1]}, written by {spec.embed_model or 'an unrecorded model'}) but the corpus has "
                         f"{len(corpus)} documents ({dim}-d, {embed_model_id(embed_model)}); rebuild it "
                         f"(rebuild=True / --rebuild) or choose another collection")
    if client.has_collection(collection_name):
        client.drop_collection(collection_name)
    create_collection(client, collection_name, default_spec(dim, embed_model=embed_model_id(embed_model)),
                      is_lite=is_lite)
    docs = list(corpus.values())
    bar: Any = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(docs), unit="doc", desc=f"embed {collection_name}")
    try:
        for start in range(0, len(docs), batch_size):
            batch = docs[start : start + batch_size]
            texts = [d.full_text for d in batch]
            vectors = embed_model.get_text_embedding_batch(texts)
            client.insert(collection_name, [
                {"id": d.doc_id, "doc_id": d.doc_id, "text": t, "embedding": list(v), "metadata": {}}
                for d, t, v in zip(batch, texts, vectors)
            ])
            if bar is not None:
                bar.update(len(batch))
    finally:
        if bar is not None:
            bar.close()
    client.flush(collection_name)
    return True
