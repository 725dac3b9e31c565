"""Opt-in: this package against a real server process, Milvus Lite 3.x's ``milvus-lite server`` (its own venv).

Skipped with the setup command when that environment is absent. ``bench/server_path.py`` prints the full table.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from llama_index_convrag.cli import main
from llama_index_convrag.milvus.client import MilvusTarget
from llama_index_convrag.ingest import ingest
from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever
from llama_index_convrag.milvus.client import connect_milvus
from llama_index_convrag.testing.lite_server import SETUP_HINT, LiteServer, lite3_executable

REPO = Path(__file__).resolve().parents[2]
DOCS = {
    "milvus.md": "# Milvus\nMilvus stores vectors. Hybrid search fuses dense vectors with BM25 sparse vectors.",
    "bread.txt": "Sourdough bread needs a starter of flour and water and a long proof.",
    "tea.txt": "Green tea steeps for two minutes in water at eighty degrees.",
}


@pytest.fixture(scope="module")
def server():
    exe = lite3_executable()
    if exe is None:
        pytest.skip(f"Milvus Lite 3.x server not installed: {SETUP_HINT}")
    with LiteServer(exe) as s:
        yield s


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    for name, text in DOCS.items():
        (folder / name).write_text(text)
    return folder


@pytest.fixture(scope="module")
def collection(server, corpus, embed_model):
    target = MilvusTarget(uri=server.uri)
    client = connect_milvus(target)
    report = ingest([corpus], collection_name="docs", embed_model=embed_model, client=client, target=target,
                    analyzer="standard")
    assert len(report.added) == 3
    return target, client


@pytest.mark.parametrize("search_type,ranker", [("dense", None), ("sparse", None), ("hybrid", "rrf")])
def test_retrieval_through_the_server(collection, embed_model, search_type, ranker):
    target, client = collection
    kw = {"ranker_type": ranker} if ranker else {}
    r = MilvusHybridRetriever.from_defaults(collection_name="docs", target=target, client=client,
                                            embed_model=embed_model, search_type=search_type, similarity_top_k=2, **kw)
    assert r.retrieve("sourdough starter flour")[0].node.metadata["file_name"] == "bread.txt"
    eq = MetadataFilters(filters=[MetadataFilter(key="file_name", value="tea.txt", operator=FilterOperator.EQ)])
    r = MilvusHybridRetriever.from_defaults(collection_name="docs", target=target, client=client,
                                            embed_model=embed_model, search_type=search_type, filters=eq, **kw)
    assert [n.node.metadata["file_name"] for n in r.retrieve("sourdough starter water")] == ["tea.txt"]


def test_two_client_processes(collection, server):
    script = ("import sys\nfrom llama_index_convrag.milvus.client import MilvusTarget\n"
              "from llama_index_convrag.milvus.client import connect_milvus\n"
              "c = connect_milvus(MilvusTarget(uri=sys.argv[1]))\n"
              "print(c.query('docs', filter='id != \"\"', output_fields=['count(*)'])[0]['count(*)'])\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    procs = [subprocess.Popen([sys.executable, "-c", script, server.uri], env=env, stdout=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0] and outs == ["3", "3"]


def test_cli_names_the_missing_english_analyzer(capsys, server, corpus):
    code = main(["ingest", str(corpus), "--uri", server.uri, "--collection", "cli_english"])
    err = capsys.readouterr().err
    assert code == 4 and "cannot build the 'english' BM25 analyzer" in err and "pass --analyzer standard" in err
    assert main(["ingest", str(corpus), "--uri", server.uri, "--collection", "cli_std", "--analyzer", "standard",
                 "-q"]) == 0


@pytest.mark.parametrize("kw", [{"search_type": "dense"}, {"search_type": "sparse"}, {}, {"ranker_type": "rrf"}])
def test_several_queries_in_one_call_per_field_through_the_server(collection, embed_model, kw):
    """retrieve_many (nq > 1 per search) gives one retrieve per query's nodes on the server too, sync and async."""
    import asyncio

    target, client = collection
    r = MilvusHybridRetriever.from_defaults(collection_name="docs", target=target, client=client,
                                            embed_model=embed_model, similarity_top_k=2, **kw)
    queries = ["sourdough starter flour", "green tea water temperature", "vector database BM25"]

    def view(lists):
        return [[(n.node_id, round(n.score, 5)) for n in nodes] for nodes in lists]

    expected = view([r.retrieve(q) for q in queries])
    assert view(r.retrieve_many(queries)) == expected
    assert view(asyncio.run(r.aretrieve_many(queries))) == expected
