"""bench/real_llm.py as the README runs it: its Milvus Lite file names are accepted by Milvus Lite."""

import importlib.util
import itertools
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _bench():
    sys.path.insert(0, str(REPO / "bench"))
    spec = importlib.util.spec_from_file_location("bench_real_llm", REPO / "bench" / "real_llm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_section_set_gets_its_own_short_file_name():
    bench = _bench()
    names = {bench.lite_file_name(combo) for n in range(1, 5) for combo in itertools.combinations(bench.SECTIONS, n)}
    assert len(names) == 15 and max(len(n) for n in names) < 36
    assert bench.lite_file_name(bench.SECTIONS) == "real_llm_0123.db"  # the README command: every section
    assert bench.lite_file_name(["latency", "rewrite"]) == "real_llm_03.db"  # order given does not matter


def test_milvus_lite_opens_the_longest_name(tmp_path):
    from llama_index_convrag.milvus import MilvusTarget, connect_milvus

    bench = _bench()
    client = connect_milvus(MilvusTarget(uri=str(tmp_path / bench.lite_file_name(bench.SECTIONS))))
    try:
        assert client.list_collections() == []
    finally:
        client.close()
