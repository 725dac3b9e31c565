"""ingest/read_stage.py: worker processes prepare files exactly as this thread does, in task order."""

from pathlib import Path

import pytest
from llama_index.core.node_parser import SentenceSplitter

from llama_index_convrag.ingest.read_stage import ReadStage, pickle_splitter
from llama_index_convrag.milvus.schema import default_spec


def test_worker_processes_give_the_results_of_this_thread_in_task_order(tmp_path: Path):
    for i in range(7):
        (tmp_path / f"f{i}.txt").write_text(" ".join(f"File {i} sentence {j} has words." for j in range(i * 5 + 1)))
    (tmp_path / "x.png").write_bytes(b"\x89PNG")
    tasks = [(p, None) for p in sorted(tmp_path.iterdir())]
    tasks[0] = (tasks[0][0], "stale-hash")  # stored with other content: updated
    splitter = SentenceSplitter(chunk_size=24, chunk_overlap=4)
    with ReadStage(splitter, default_spec(4), workers=0, ahead=1) as inline:
        here = list(inline.map(tasks))
    with ReadStage(splitter, default_spec(4), workers=2, ahead=3) as pool:
        there = list(pool.map(tasks))
    assert [p.doc_id for p in there] == [t[0].as_posix() for t in tasks]
    assert [(p.outcome, p.reason, p.content_hash, p.size) for p in there] == \
        [(p.outcome, p.reason, p.content_hash, p.size) for p in here]
    assert [[(c.doc_id, c.text, c.row) for c in p.chunks] for p in there] == \
        [[(c.doc_id, c.text, c.row) for c in p.chunks] for p in here]
    # the workers leave the nodes behind (costly to send); this thread keeps them for extra dense fields
    assert all(c.node is None for p in there for c in p.chunks) and all(c.node is not None for c in here[6].chunks)
    assert here[0].outcome == "updated" and here[-1].outcome == "unsupported" and len(here[6].chunks) > 2


def test_a_splitter_that_cannot_travel_names_the_way_out():
    class Local(SentenceSplitter):  # a class defined in a function cannot be pickled
        pass

    with pytest.raises(ValueError, match="cannot be sent to reader processes .*; pass read_workers=0"):
        pickle_splitter(Local(chunk_size=24, chunk_overlap=4))
