"""`convrag ask PATH Q --gguf M`: the CLI serves the GGUF itself and answers with citations.

The answer's wording is the model's: Qwen2.5-0.5B answered this question with "[1]" alone (a valid citation of the
tea passage, no sentence), so only the shape is asserted.
"""

import json

import pytest

from llama_index_convrag.cli import main

pytestmark = pytest.mark.real_llm


def test_ask_with_gguf_answers_and_cites(capsys, real_llm_setup, milvus_target, collection_name, tmp_path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tea.txt").write_text("Green tea should steep for two minutes in water at eighty degrees.")
    (docs / "tower.txt").write_text("The Eiffel Tower in Paris was completed in 1889.")
    code = main(["ask", str(docs), "How long should green tea steep?", "--gguf", str(real_llm_setup.gguf),
                 "--uri", milvus_target.uri, "--collection", collection_name, "--store", str(tmp_path / "c.db"),
                 "--top-k", "2", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    turn = json.loads(out.out)["turns"][0]
    assert turn["answer"].strip()
    assert [c["marker"] for c in turn["citations"]] == [1, 2]  # the two passages retrieved, numbered
    assert all(c["cited_as"] in (None, 1, 2) for c in turn["citations"])
