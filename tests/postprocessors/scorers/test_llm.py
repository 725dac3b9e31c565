from __future__ import annotations

import pytest

from llama_index_convrag.postprocessors import FALLBACK_KEY, ModelRerank
from llama_index_convrag.postprocessors.scorers.base import ScorerError
from llama_index_convrag.postprocessors.scorers.llm import (
    Choice,
    LLMScorer,
    listwise_scores,
    parse_listwise,
    parse_pointwise,
)
from llama_index_convrag.testing import ScriptedLLM
from tests.postprocessors.conftest import ids, make_nodes

EXPECTED_LISTWISE_PROMPT = (
    "Below are 3 numbered documents and a question.\n"
    "List the documents that help answer the question, most relevant first, one per line, exactly as\n"
    "Doc: <number>, Relevance: <1-10>\n"
    "Use only document numbers from 1 to 3, list each document at most once, leave out irrelevant\n"
    "documents, and write nothing else.\n\n"
    "Document 1:\nalpha\n\nDocument 2:\nbeta\n\nDocument 3:\ngamma\n\n"
    "Question: which one?\n"
    "Answer:\n"
)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        # issue 17352: an unrelated line with a comma after the list
        ("Doc: 2, Relevance: 9\nDoc: 1, Relevance: 8\n\nThe document with the highest relevance score is Doc: 2, "
         "as it directly answers the question.", [Choice(2, 9.0), Choice(1, 8.0)]),
        # issue 11093: pure chit-chat
        ('The question "great!" is not clear, therefore no documents are relevant.', []),
        # issue 22743: 0 and negative numbers must not wrap around to the last node; too large is dropped
        ("Doc: 0, Relevance: 10\nDoc: -1, Relevance: 9\nDoc: 4, Relevance: 9\nDoc: 3, Relevance: 5",
         [Choice(3, 5.0)]),
        # duplicates keep the first mention
        ("Doc: 3, Relevance: 7\nDoc: 1, Relevance: 6\nDoc: 3, Relevance: 10", [Choice(3, 7.0), Choice(1, 6.0)]),
        # issue 22404: an unreadable relevance does not shift scores onto other documents
        ("Doc: 2, Relevance: 9\nDoc: 1, Relevance: high\nDoc: 3, Relevance: 7",
         [Choice(2, 9.0), Choice(1, None), Choice(3, 7.0)]),
        # bullets, numbering, markdown, 'Document N', out-of-scale relevance
        ("Sure! Here you go:\n1. **Doc 3**, relevance score: 8\n- Document #1 - Relevance=42\n* [2]",
         [Choice(3, 8.0), Choice(1, None)]),
        # prose that starts with a document number is not a pick; a bare listing is
        ("Document 2 does not help at all.\nDoc 1.\nDoc: 3", [Choice(1, None), Choice(3, None)]),
        # bare numbers only: Qwen2.5-0.5B (llama.cpp server, greedy) replied "1"; lists of numbers in order
        ("1", [Choice(1, None)]),
        ("2, 1, 3", [Choice(2, None), Choice(1, None), Choice(3, None)]),
        ("[3] [7] [3]", [Choice(3, None)]),
        # a number inside prose is not a listing
        ("I think 2 is best", []),
        # Qwen2.5-0.5B's reply (4 documents): references only, on one line
        ("Document 1, Document 3", [Choice(1, None), Choice(3, None)]),
        # the same model answered the question instead: "Norway", "1361" (out of range): nothing to read
        ("Norway", []),
        ("1361", []),
    ],
    ids=["comma-line", "chit-chat", "out-of-range", "duplicates", "unreadable-relevance", "formatting", "prose",
         "bare-number", "bare-list", "bare-brackets", "number-in-prose", "doc-list-line", "answer-word",
         "answer-number"],
)
def test_parse_listwise_nasty_replies(reply, expected):
    assert parse_listwise(reply, 3, 10) == expected


def test_listwise_scores_inherit_missing_relevance_and_break_ties_by_listed_order():
    scores = listwise_scores([Choice(2, 9.0), Choice(1, None), Choice(3, 7.0)], 4, 10)
    assert scores == pytest.approx([8.999, 9.0, 6.998, 0.0])
    assert listwise_scores([Choice(3, None), Choice(1, None)], 3, 10) == pytest.approx([9.999, 0.0, 10.0])


@pytest.mark.parametrize(
    ("reply", "expected"),
    [("7", 7.0), ("**8**", 8.0), ("Relevance: 6", 6.0), ("I would rate it 7/10.", 7.0), ("Score: 4.5", 4.5),
     ("7. The document discusses 3 things", 7.0), ("8 - relevant", 8.0), ("great!", None), ("11", None),
     ("10.5 points", None), ("On a scale of 0 to 10, I would say 8", None), ("", None), ("-3", None)],
)
def test_parse_pointwise(reply, expected):
    assert parse_pointwise(reply, 10) == expected


def test_listwise_prompt_and_single_call():
    llm = ScriptedLLM.fixed("Doc: 3, Relevance: 9\nDoc: 1, Relevance: 4")
    scores = LLMScorer(llm).score("which one?", ["alpha", "beta", "gamma"])
    assert llm.prompts == [EXPECTED_LISTWISE_PROMPT]
    assert scores == pytest.approx([3.999, 0.0, 9.0])


async def test_listwise_async_twin():
    llm = ScriptedLLM.fixed("Doc: 3, Relevance: 9\nDoc: 1, Relevance: 4")
    scores = await LLMScorer(llm).ascore("which one?", ["alpha", "beta", "gamma"])
    assert llm.prompts == [EXPECTED_LISTWISE_PROMPT]
    assert scores == pytest.approx([3.999, 0.0, 9.0])


def test_real_model_bare_number_reply_scores_that_document():
    """Qwen2.5-Coder-0.5B-Instruct's exact listwise reply (3 documents, greedy): "1"."""
    scores = LLMScorer(ScriptedLLM.fixed("1")).score("How long should green tea steep?", ["a", "b", "c"])
    assert scores == [10.0, 0.0, 0.0]


def test_listwise_reply_without_documents_raises():
    with pytest.raises(ScorerError, match="named no document in 1..2"):
        LLMScorer(ScriptedLLM.fixed("None of these help, sorry.")).score("q", ["a", "b"])


def test_pointwise_one_call_per_text_with_exact_prompt():
    llm = ScriptedLLM.cycle(["7", "Relevance: 2", "hmm"])
    scores = LLMScorer(llm, mode="pointwise").score("q?", ["a", "b", "c"])
    assert scores == [7.0, 2.0, 0.0]
    assert llm.prompts[1] == (
        "Rate how well the document answers the question on a scale from 0 (unrelated) to 10\n"
        "(answers it fully). Reply with the number only.\n\nDocument:\nb\n\nQuestion: q?\nRelevance:"
    )
    assert llm.call_count == 3


async def test_pointwise_async_scores_by_text():
    llm = ScriptedLLM.from_fn(lambda p: "9" if "Document:\nb\n" in p else "1")
    scores = await LLMScorer(llm, mode="pointwise", num_workers=2).ascore("q", ["a", "b", "c"])
    assert scores == [1.0, 9.0, 1.0]
    assert llm.call_count == 3


def test_pointwise_all_unreadable_raises():
    with pytest.raises(ScorerError, match="no LLM pointwise reply held a rating"):
        LLMScorer(ScriptedLLM.fixed("I cannot say."), mode="pointwise").score("q", ["a", "b"])


@pytest.mark.parametrize("use_async", [False, True])
async def test_model_rerank_never_picks_a_wrong_node_and_falls_back_on_llm_failure(use_async):
    nodes = make_nodes(["alpha", "beta", "gamma"], [0.3, 0.2, 0.1])
    llm = ScriptedLLM.fixed("Doc: 0, Relevance: 10\nDoc: 2, Relevance: 6\nDoc: 2, Relevance: 10\nThanks, Doc: 1!")
    reranker = ModelRerank(LLMScorer(llm), top_n=2)
    out = await reranker.apostprocess_nodes(nodes, query_str="q") if use_async else \
        reranker.postprocess_nodes(nodes, query_str="q")
    assert ids(out) == ["n1", "n0"]
    assert [n.score for n in out] == [6.0, 0.0]
    failing = ModelRerank(LLMScorer(ScriptedLLM.fixed("x", fail_on_call=0)), top_n=2)
    out = await failing.apostprocess_nodes(nodes, query_str="q") if use_async else \
        failing.postprocess_nodes(nodes, query_str="q")
    assert ids(out) == ["n0", "n1"]
    assert out[0].node.metadata[FALLBACK_KEY].startswith("ScriptedFailure")


def test_batches_are_separate_listwise_prompts():
    llm = ScriptedLLM.cycle(["Doc: 2, Relevance: 5", "Doc: 1, Relevance: 8"])
    nodes = make_nodes(["a", "b", "c"])
    out = ModelRerank(LLMScorer(llm), batch_size=2).postprocess_nodes(nodes, query_str="q")
    assert llm.call_count == 2
    assert "Document 1:\nc" in llm.prompts[1]
    assert ids(out) == ["n2", "n1", "n0"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"mode": "pairwise"}, "mode must be one of ['listwise', 'pointwise'], got 'pairwise'"),
     ({"max_relevance": 0}, "max_relevance must be >= 1, got 0"),
     ({"num_workers": 0}, "num_workers must be >= 1, got 0")],
)
def test_validation(kwargs, message):
    with pytest.raises(ValueError) as info:
        LLMScorer(ScriptedLLM.echo(), **kwargs)
    assert str(info.value) == message


# --- the prompt fits the LLM's window ---------------------------------------------------------------------------
from llama_index_convrag.config.tokens import count_tokens  # noqa: E402
from llama_index_convrag.postprocessors.scorers.llm import (  # noqa: E402
    MIN_PASSAGE_TOKENS, cut_passages, passage_budget)

LONG_TEXTS = [" ".join(f"passage{i} word{j}" for j in range(300)) for i in range(10)]


def test_passage_budget_shares_the_window_left_and_refuses_below_the_minimum():
    assert passage_budget(4096, 512, 100, 10) == (int(0.95 * (4096 - 512)) - 100) // 10
    with pytest.raises(ScorerError, match=r"10 passage\(s\) share 100 tokens \(floor\(0.95 x \(1000 - 800 output\)\) "
                                          r"- 90 for the prompt\), under 16 each"):
        passage_budget(1000, 800, 90, 10)


def test_cut_passages_cuts_only_the_long_ones():
    texts, cut = cut_passages(["short one", LONG_TEXTS[0]], 20)
    assert cut == 1 and texts[0] == "short one" and count_tokens(texts[1]) <= 20
    assert LONG_TEXTS[0].startswith(texts[1])


@pytest.mark.parametrize("mode", ["listwise", "pointwise"])
def test_every_prompt_fits_the_window_of_the_llm(mode):
    llm = ScriptedLLM.fixed("Doc: 1, Relevance: 9" if mode == "listwise" else "5", context_window=1024)
    LLMScorer(llm, mode=mode).score("which passage?", LONG_TEXTS)
    reserved = 256  # the scripted LLM states no output limit
    assert llm.prompts and all(count_tokens(p) <= int(0.95 * (1024 - reserved)) for p in llm.prompts)
    assert all(f"passage{i} word0" in "".join(llm.prompts) for i in range(10))  # every passage is still there


def test_a_window_too_small_for_the_passages_is_a_scorer_error_before_any_call():
    llm = ScriptedLLM.fixed("Doc: 1, Relevance: 9", context_window=400)
    texts = [f"passage {i}" for i in range(40)]
    with pytest.raises(ScorerError, match=f"under {MIN_PASSAGE_TOKENS} each"):
        LLMScorer(llm).score("q", texts)
    assert llm.call_count == 0
