"""Metadata never makes a small chunk size fail a file: chunks are embedded without it, so it is not counted."""

from pathlib import Path

from llama_index_convrag.ingest.pipeline import HIDDEN_METADATA_KEYS, ingest


def test_a_long_path_and_a_small_chunk_size_ingest(tmp_path: Path, milvus_client, collection_name, embed_model):
    folder = tmp_path / ("very_long_folder_name_" * 6)
    folder.mkdir()
    path = folder / ("a_long_file_name_" * 12 + ".txt")
    path.write_text("The ls command lists directory contents. " * 60)
    assert len(str(path)) > 150  # its metadata alone is longer than the 64-token chunks
    report = ingest([folder], client=milvus_client, collection_name=collection_name, embed_model=embed_model,
                    chunk_size=64, chunk_overlap=8)
    assert report.failed == [] and len(report.added) == 1
    rows = milvus_client.query(collection_name, filter='id != ""', output_fields=["text", "metadata"])
    assert len(rows) > 5
    assert all(r["metadata"]["file_name"] == path.name for r in rows)


def test_nodes_hide_the_bookkeeping_keys_again_after_splitting(tmp_path: Path, milvus_client, collection_name,
                                                             embed_model):
    from llama_index_convrag.ingest.pipeline import Ingestor

    path = tmp_path / "a.txt"
    path.write_text("One sentence here. " * 40)
    ingestor = Ingestor.from_defaults(collection_name=collection_name, embed_model=embed_model, client=milvus_client,
                                      chunk_size=64, chunk_overlap=8)
    nodes = ingestor._chunks(path, "a.txt", "h")
    assert len(nodes) > 1
    assert all(n.excluded_embed_metadata_keys == list(HIDDEN_METADATA_KEYS) for n in nodes)
    assert all(n.excluded_llm_metadata_keys == list(HIDDEN_METADATA_KEYS) for n in nodes)
