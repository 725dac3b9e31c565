"""Retrieve small, read big: the pure widening rules on hand-built chunks, then one real run over Milvus Lite."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, List

import pytest
from llama_index.core.schema import MetadataMode, NodeRelationship, NodeWithScore, RelatedNodeInfo, TextNode

from llama_index_convrag.chat.options import AnswerOptions, BudgetOptions
from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.indices import ConvRAGIndex
from llama_index_convrag.ingest.pipeline import ingest
from llama_index_convrag.memory import EpisodicOptions, MemoryOptions, SummaryOptions
from llama_index_convrag.postprocessors.widen import (GAP, WIDEN_KEY, NeighbourWidener, Passage, WidenRules,
                                                      hit_texts, join_chunks, matched_span, missing_ranges,
                                                      narrow_contents, narrow_text, narrowed_nodes, plan_passages,
                                                      wanted_ranges, widen_nodes, with_widener)
from llama_index_convrag.rank_trail import add_stage, get_trail
from llama_index_convrag.storage.conversation import SQLiteConversationStore
from llama_index_convrag.testing import ScriptedLLM

# four chunks of one document, each sharing its first sentence with the previous one (the splitter's overlap)
CHUNKS = ["Alpha one two three. Beta four five six.", "Beta four five six. Gamma seven eight nine.",
          "Gamma seven eight nine. Delta ten eleven twelve.", "Delta ten eleven twelve. Epsilon thirteen."]
WHOLE = "Alpha one two three. Beta four five six. Gamma seven eight nine. Delta ten eleven twelve. Epsilon thirteen."
TEXTS = {("doc", i): t for i, t in enumerate(CHUNKS)}


def hit(chunk: int, score: float, doc: str = "doc", count: int = 4) -> NodeWithScore:
    node = TextNode(id_=f"{doc}#{chunk}", text=CHUNKS[chunk], metadata={"chunk": chunk, "chunk_count": count})
    node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=doc)
    return NodeWithScore(node=node, score=score)


def test_join_chunks_reads_the_shared_overlap_once_and_says_where_each_starts():
    text, starts = join_chunks(CHUNKS)
    assert text == WHOLE
    assert [text[s:s + len(c)] for s, c in zip(starts, CHUNKS)] == CHUNKS
    # no overlap (or one too short to be the splitter's): joined with a space
    assert join_chunks(["First part.", "Second part."]) == ("First part. Second part.", [0, 12])
    assert join_chunks(["ends with e", "e starts"]) == ("ends with e e starts", [0, 12])


def test_plan_merges_neighbourhoods_that_overlap_or_touch_and_keeps_the_best_hit_first():
    keys = [("doc", 2, 10), None, ("doc", 0, 10), ("other", 5, 6), ("doc", 6, 10), ("doc", 4, 10)]
    plan = plan_passages(keys, WidenRules())
    # doc 2 -> [1, 3], doc 0 -> [0, 2] merges; doc 6 -> [5, 7] and doc 4 -> [3, 5] bridge the rest: one passage;
    # the last chunk of "other" reads the two before it; the hit without a key is read as it is, in its place
    assert plan == [Passage("doc", 0, 7, [0, 2, 4, 5]), Passage(None, 0, -1, [1]), Passage("other", 3, 5, [3])]
    apart = plan_passages([("doc", 1, 10), ("doc", 5, 10)], WidenRules())
    assert apart == [Passage("doc", 0, 2, [0]), Passage("doc", 4, 6, [1])]
    # the chunk count bounds the last chunk; without it, the fetch finds what exists
    assert plan_passages([("doc", 3, 4)], WidenRules(before=2, after=2)) == [Passage("doc", 0, 3, [0])]
    assert plan_passages([("doc", 0, 9)], WidenRules()) == [Passage("doc", 0, 2, [0])]
    assert plan_passages([("doc", 3, None)], WidenRules(before=0, after=2)) == [Passage("doc", 3, 5, [0])]


def test_a_passage_limit_gives_the_places_of_merged_hits_to_the_next_hits():
    keys = [("a", 4, 20), ("a", 5, 20), ("b", 0, 3), ("a", 12, 20), ("c", 1, 3)]
    plan = plan_passages(keys, WidenRules(passages=2))
    assert plan == [Passage("a", 3, 6, [0, 1]), Passage("b", 0, 2, [2])]  # a#5 merged: b fills its place
    assert len(plan_passages(keys, WidenRules(passages=3))) == 3 and len(plan_passages(keys, WidenRules())) == 4
    with pytest.raises(ConfigurationError, match="passages must be None or an int >= 1, got 0"):
        WidenRules(passages=0)


def test_widen_nodes_keeps_the_matched_chunk_id_score_and_trail_and_drops_merged_hits():
    best, other, later = hit(2, 0.9), NodeWithScore(node=TextNode(id_="x", text="unrelated"), score=0.8), hit(0, 0.7)
    add_stage(best, "dense", 1, 0.9)
    nodes = [best, other, later]
    assert wanted_ranges(nodes, WidenRules()) == [("doc", 0, 3)]
    out = widen_nodes(nodes, WidenRules(), TEXTS)
    assert [(n.node.node_id, n.score) for n in out] == [("doc#2", 0.9), ("x", 0.8)]
    node = out[0].node
    assert node.get_content(metadata_mode=MetadataMode.NONE) == WHOLE
    assert node.ref_doc_id == "doc" and get_trail(out[0]) == get_trail(best)
    assert node.metadata[WIDEN_KEY] == {"chunks": [0, 3], "matched": [[2, 41, 89, "doc#2"], [0, 0, 40, "doc#0"]],
                                        "length": len(WHOLE)}
    start, end = matched_span(node.metadata)
    assert WHOLE[start:end] == CHUNKS[2]
    assert WIDEN_KEY not in node.get_content(metadata_mode=MetadataMode.LLM)
    assert best.node.get_content() == CHUNKS[2]  # the input node is not changed
    assert out[1] is other


def test_missing_rows_and_unknown_nodes_leave_what_is_there():
    out = widen_nodes([hit(1, 0.5)], WidenRules(), {("doc", 2): CHUNKS[2]})  # chunk 0 is gone from the store
    assert out[0].node.get_content() == "Beta four five six. Gamma seven eight nine. Delta ten eleven twelve."
    assert out[0].node.metadata[WIDEN_KEY]["chunks"] == [1, 2]


def test_narrow_text_cuts_a_passage_back_to_its_matched_chunks():
    out = widen_nodes([hit(2, 0.9), hit(0, 0.7)], WidenRules(), TEXTS)
    assert narrow_text(out[0]) == CHUNKS[0] + GAP + CHUNKS[2]
    adjacent = widen_nodes([hit(1, 0.9), hit(2, 0.8)], WidenRules(before=0, after=0), TEXTS)
    assert narrow_text(adjacent[0]) == "Beta four five six. Gamma seven eight nine. Delta ten eleven twelve."
    plain = hit(3, 0.1)
    assert narrow_text(plain) is None and narrow_contents([out[0], plain])[1] is None
    cut = narrowed_nodes(out, [0])
    assert cut[0].node.get_content() == CHUNKS[0] + GAP + CHUNKS[2] and WIDEN_KEY not in cut[0].node.metadata
    assert cut[0].node.node_id == "doc#2" and narrowed_nodes(out, []) == out


def test_chunks_among_the_hits_are_not_fetched_again():
    nodes = [hit(2, 0.9), NodeWithScore(node=TextNode(id_="x", text="unrelated"), score=0.8), hit(0, 0.7),
             hit(1, 0.6, doc="other")]
    known = hit_texts(nodes)
    assert known == {("doc", 2): CHUNKS[2], ("doc", 0): CHUNKS[0], ("other", 1): CHUNKS[1]}
    assert missing_ranges([("doc", 0, 3), ("other", 0, 2)], known) == [("doc", 1, 1), ("doc", 3, 3),
                                                                       ("other", 0, 0), ("other", 2, 2)]
    assert missing_ranges([("doc", 0, 0), ("doc", 2, 2)], known) == []
    assert missing_ranges([("new", 4, 6)], known) == [("new", 4, 6)]
    # what the hits hold and what a fetch gives read the same passage as a fetch of every chunk
    fetched = {k: v for k, v in TEXTS.items() if k not in known}
    assert [n.node.get_content() for n in widen_nodes(nodes, WidenRules(), {**known, **fetched})] == \
        [n.node.get_content() for n in widen_nodes(nodes, WidenRules(), TEXTS)]


def test_rules_are_validated():
    with pytest.raises(ConfigurationError, match=r"before must be an int in \[0, 16\] \(chunks\), got -1"):
        WidenRules(before=-1)
    with pytest.raises(ConfigurationError, match="after must be an int"):
        WidenRules(after=True)


# --- against Milvus Lite --------------------------------------------------------------------------------------------

SECTIONS = [f"Section {i}: the {word} valley grows {crop} on its terraces, and the harvest festival is held in "
            f"{month}." for i, (word, crop, month) in enumerate([
                ("northern", "barley", "June"), ("eastern", "saffron", "October"), ("southern", "olives", "November"),
                ("western", "grapes", "September"), ("central", "rice", "August"), ("coastal", "lemons", "May")])]


def test_with_widener_appends_one_only_over_our_retriever_and_only_once(stored, milvus_client, collection_name,
                                                                         embed_model):
    index = ConvRAGIndex.from_collection(collection_name, embed_model=embed_model, client=milvus_client)
    ours, other = index.as_retriever(), object()
    [widener] = with_widener(None, ours, WidenRules(before=2))
    assert isinstance(widener, NeighbourWidener) and widener.rules == WidenRules(before=2)
    assert with_widener([widener], ours, WidenRules()) == [widener]  # one given already: not a second
    assert with_widener(None, ours, None) == [] and with_widener((), other, WidenRules()) == []
    with pytest.raises(TypeError, match=r"as_query_engine\(widen=...\) must be a WidenRules or None .*got True"):
        index.as_query_engine(llm=ScriptedLLM.fixed("x"), widen=True)


@pytest.fixture
def stored(tmp_path: Path, milvus_client: Any, collection_name: str, embed_model: Any) -> Path:
    path = tmp_path / "valleys.txt"
    path.write_text(" ".join(SECTIONS * 3))
    ingest([path], client=milvus_client, collection_name=collection_name, embed_model=embed_model, chunk_size=40,
           chunk_overlap=8)
    return path


def test_a_hit_is_read_with_its_neighbours_fetched_from_milvus(stored, milvus_client, collection_name, embed_model):
    index = ConvRAGIndex.from_collection(collection_name, embed_model=embed_model, client=milvus_client)
    hits = index.as_retriever(similarity_top_k=1, search_type="sparse").retrieve("saffron")
    assert len(hits) == 1
    number = hits[0].node.metadata["chunk"]
    widener = NeighbourWidener(client=milvus_client, collection_name=collection_name, spec=index.spec)
    [passage] = widener.postprocess_nodes(hits)
    rows = {r["metadata"]["chunk"]: r["text"] for r in milvus_client.query(
        collection_name, filter='id != ""', output_fields=["text", "metadata"])}
    first = max(0, min(number - 1, len(rows) - 3))  # three chunks around the hit, shifted inward at an edge
    last = min(len(rows) - 1, first + 2)
    assert passage.node.node_id == hits[0].node.node_id and passage.score == hits[0].score
    assert passage.node.metadata[WIDEN_KEY]["chunks"] == [first, last]
    text = passage.node.get_content(metadata_mode=MetadataMode.NONE)
    assert all(rows[n] in text for n in range(first, last + 1))
    assert " ".join(text.split()) in " ".join(stored.read_text().split())  # overlaps read once: a run of the file
    start, end = matched_span(passage.node.metadata)
    assert text[start:end] == hits[0].node.get_content(metadata_mode=MetadataMode.NONE)


def test_the_async_widening_queries_on_the_loop_and_reads_what_the_sync_one_reads(stored, milvus_client, milvus_target,
                                                                                  collection_name, embed_model,
                                                                                  monkeypatch):
    index = ConvRAGIndex.from_collection(collection_name, embed_model=embed_model, client=milvus_client,
                                         target=milvus_target)
    retriever = index.as_retriever(similarity_top_k=2, search_type="sparse")
    hits = retriever.retrieve("saffron")
    widener = NeighbourWidener.from_retriever(retriever)
    expected = widener.postprocess_nodes(hits)

    def no_thread(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the async widening went to a worker thread")

    monkeypatch.setattr(asyncio, "to_thread", no_thread)
    widened = asyncio.run(widener.apostprocess_nodes(hits))
    assert [(n.node.node_id, n.node.get_content(metadata_mode=MetadataMode.NONE), n.node.metadata[WIDEN_KEY])
            for n in widened] == [(n.node.node_id, n.node.get_content(metadata_mode=MetadataMode.NONE),
                                   n.node.metadata[WIDEN_KEY]) for n in expected]
    assert len(widened[0].node.get_content(metadata_mode=MetadataMode.NONE)) > len(hits[0].node.get_content())
    # every chunk to read among the hits: no query at all, sync or async
    whole = WidenRules(before=0, after=0)
    narrow = NeighbourWidener.from_retriever(retriever, whole)
    def no_query(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the widening queried Milvus for chunks it had")

    monkeypatch.setattr(type(milvus_client), "query", no_query)
    assert [n.node.metadata[WIDEN_KEY]["chunks"] for n in narrow.postprocess_nodes(hits)] == \
        [[n.node.metadata["chunk"]] * 2 for n in hits]
    assert [n.node.get_content(metadata_mode=MetadataMode.NONE) for n in asyncio.run(narrow.apostprocess_nodes(hits))] \
        == [n.node.get_content(metadata_mode=MetadataMode.NONE) for n in hits]


def test_the_chat_engine_answers_from_widened_passages_and_cites_the_matched_chunk(stored, milvus_client,
                                                                                   collection_name, embed_model):
    index = ConvRAGIndex.from_collection(collection_name, embed_model=embed_model, client=milvus_client)
    llm = ScriptedLLM.fixed("Saffron.")
    top1 = {"similarity_top_k": 1, "search_type": "sparse"}
    engine = index.as_chat_engine(llm=llm, retriever_kwargs=top1)
    response = engine.chat("Which valley grows saffron?")
    matched = index.as_retriever(similarity_top_k=1, search_type="sparse").retrieve("Which valley grows saffron?")
    [source] = response.source_nodes
    assert source.node.node_id == matched[0].node.node_id
    assert len(source.node.get_content(metadata_mode=MetadataMode.NONE)) > len(matched[0].node.get_content())
    record = response.metadata["turn"]
    assert record.trim_report["widened"] == [0]
    narrow = index.as_chat_engine(llm=ScriptedLLM.fixed("Saffron."), retriever_kwargs=top1,
                                  answer=AnswerOptions(widen=None)).chat("Which valley grows saffron?")
    assert narrow.source_nodes[0].node.get_content() == matched[0].node.get_content()
    with pytest.raises(TypeError, match=r"AnswerOptions.widen must be a WidenRules or None .*got 2"):
        AnswerOptions(widen=2)
    with pytest.raises(TypeError, match=r"widen: now answer=AnswerOptions\(widen="):
        index.as_chat_engine(llm=llm, widen=False)
    queried = index.as_query_engine(llm=ScriptedLLM.fixed("Saffron."), **top1).query("Which valley grows saffron?")
    assert WIDEN_KEY in queried.source_nodes[0].node.metadata
    plain = index.as_query_engine(llm=ScriptedLLM.fixed("Saffron."), widen=None, **top1)
    assert WIDEN_KEY not in plain.query("Which valley grows saffron?").source_nodes[0].node.metadata


def test_the_extractive_answer_reads_the_widened_passage(stored, milvus_client, collection_name, embed_model):
    """Without an LLM the extractive answer picks its sentences from the widened passage, not the matched chunk
    alone: asked of the harvest months, it quotes sentences the matched chunk does not hold."""
    index = ConvRAGIndex.from_collection(collection_name, embed_model=embed_model, client=milvus_client)
    top1 = {"similarity_top_k": 1, "search_type": "sparse"}
    query = "In which month is the harvest festival of the valley that grows saffron?"
    [matched] = index.as_retriever(**top1).retrieve(query)
    response = index.as_chat_engine(llm=None, retriever_kwargs=top1).chat(query)
    [source] = response.source_nodes
    passage = source.node.get_content(metadata_mode=MetadataMode.NONE)
    chunk = matched.node.get_content(metadata_mode=MetadataMode.NONE)
    assert source.node.node_id == matched.node.node_id and chunk in passage and len(passage) > len(chunk)
    quoted = [s.strip() for s in response.response.replace("[1]", "").split(". ") if s.strip()]
    assert quoted and all(q.rstrip(".") in passage for q in quoted)
    assert any(q.rstrip(".") not in chunk for q in quoted)  # a sentence of a neighbouring chunk


#: Memory with the summary alone (no second collection): its turns fit every block under one budget (fit_blocks).
SUMMARY_ONLY = MemoryOptions(episodic=EpisodicOptions(enabled=False), summary=SummaryOptions(window=4))


@pytest.mark.parametrize("memory", [False, True], ids=["memory off", "memory on"])
def test_a_tight_budget_cuts_the_widening_before_any_chunk(stored, milvus_client, collection_name, embed_model,
                                                           tmp_path, memory):
    index = ConvRAGIndex.from_collection(collection_name, embed_model=embed_model, client=milvus_client)
    query = "Which valley grows saffron?"
    kw = {"retriever_kwargs": {"similarity_top_k": 2, "search_type": "sparse"},
          "budget": BudgetOptions(reserved_output_tokens=100)}
    if memory:  # the same budget over the memory's blocks: widened evidence is cut back the same way
        kw.update(memory=SUMMARY_ONLY, conversation_store=SQLiteConversationStore(tmp_path / "c.db"))
    with index.as_chat_engine(llm=ScriptedLLM.fixed("Saffron.", num_output=20), **kw) as engine:
        roomy = engine.chat(query)
    wide = roomy.metadata["turn"].trim_report
    assert wide["dropped"] == [] and wide["widened"] == list(range(len(roomy.source_nodes)))
    # a window one token short of the widened context: the lowest-ranked passage is read narrow, nothing is dropped
    window = 100 + -(-(wide["total"] - 1) * 100 // 95)
    with index.as_chat_engine(llm=ScriptedLLM.fixed("Saffron.", context_window=window, num_output=20),
                              **kw) as engine:
        tight = engine.chat(query)
    report = tight.metadata["turn"].trim_report
    last = len(roomy.source_nodes) - 1
    assert [(d["section"], d["index"]) for d in report["dropped"]] == [("widening", last)]
    assert report["kept_chunks"] == list(range(last + 1)) and report["widened"] == list(range(last))
    assert report["total"] <= report["budget"] < wide["total"]
    assert WIDEN_KEY not in tight.source_nodes[last].node.metadata
    assert tight.source_nodes[last].node.node_id == roomy.source_nodes[last].node.node_id
    if memory:  # the record's context holds the evidence as read: the cut-back passage narrow
        evidence = dict((name, items) for name, items in tight.metadata["turn"].context["blocks"])["evidence"]
        assert evidence[last] == tight.source_nodes[last].node.get_content(metadata_mode=MetadataMode.LLM)
        assert len(evidence[last]) < len(roomy.source_nodes[last].node.get_content(metadata_mode=MetadataMode.LLM))
        assert report["tokens_before"]["evidence"] > report["tokens"]["evidence"]
        kw["conversation_store"].close()
