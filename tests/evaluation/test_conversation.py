import math
import re

import pytest

from llama_index_convrag.evaluation.conversation import (collect_records, concat_history, replay_conversations,
                                                         rewrite_effect, strategy_from_records)
from llama_index_convrag.evaluation.datasets import ConversationTurn, Dialogue

#: replays score with ranx: its kernels compiled once per test run (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("ranx_compiled")

CORPUS = {
    "lung": "lung cancer symptoms cough",
    "throat": "throat cancer treatment",
    "mars": "mars rover mission",
    "moon": "moon landing apollo",
}


def _words(text):
    return set(re.findall(r"[a-z]+", text.lower()))


def make_retriever():
    """Word-overlap ranking over CORPUS (ties by doc id); records every query it receives."""
    calls = []

    def retrieve(query):
        calls.append(query)
        scored = [(doc_id, len(_words(query) & _words(text))) for doc_id, text in CORPUS.items()]
        return sorted([(d, float(s)) for d, s in scored if s > 0], key=lambda x: (-x[1], x[0]))

    return retrieve, calls


def _turn(dialogue_id, position, utterance, rewrite, relevant):
    return ConversationTurn(turn_id=f"{dialogue_id}_{position}", dialogue_id=dialogue_id, position=position,
                            utterance=utterance, rewrite=rewrite, relevant={relevant: 1} if relevant else {})


DIALOGUES = [
    Dialogue("A", (
        _turn("A", 1, "What is throat cancer?", "What is throat cancer?", "throat"),
        _turn("A", 2, "Is it treatable?", "Is throat cancer treatable?", "throat"),
    )),
    Dialogue("B", (
        _turn("B", 1, "Tell me about the mars rover", "Tell me about the mars rover", "mars"),
        _turn("B", 2, "What about the moon?", "What about the moon landing?", "moon"),
        _turn("B", 3, "Thanks!", "Thanks!", None),  # unjudged: not replayed
    )),
]
NDCG_RANK2 = 1 / math.log2(3)


def test_replay_scores_raw_manual_and_a_strategy():
    retrieve, calls = make_retriever()
    result = replay_conversations(DIALOGUES, retrieve, {"concat": concat_history(1)}, ks=(2,))
    assert list(result.strategies) == ["raw", "manual", "concat"]
    # Turns in order, strategies in order within a turn; the unjudged B_3 is never retrieved.
    assert calls == [
        "What is throat cancer?", "What is throat cancer?", "What is throat cancer?",
        "Is it treatable?", "Is throat cancer treatable?", "What is throat cancer? Is it treatable?",
        "Tell me about the mars rover", "Tell me about the mars rover", "Tell me about the mars rover",
        "What about the moon?", "What about the moon landing?", "Tell me about the mars rover What about the moon?",
    ]
    per_turn = {name: {t: s["ndcg@2"] for t, s in r.metrics.per_query.items()}
                for name, r in result.strategies.items()}
    assert per_turn["raw"] == {"A_1": 1.0, "A_2": 0.0, "B_1": 1.0, "B_2": 1.0}
    assert per_turn["manual"] == {"A_1": 1.0, "A_2": 1.0, "B_1": 1.0, "B_2": 1.0}
    assert per_turn["concat"] == pytest.approx({"A_1": 1.0, "A_2": 1.0, "B_1": 1.0, "B_2": NDCG_RANK2})
    assert result.strategies["raw"].means["ndcg@2"] == 0.75
    assert result.strategies["raw"].per_position("ndcg@2") == {1: 1.0, 2: 0.5}

    concat = result.effects["concat"].to_dict()
    assert concat == {
        "k": 2, "turns": 4, "changed": 2, "changed_fraction": 0.5, "improved": 1, "worsened": 1, "tied": 0,
        "improved_fraction_of_changed": 0.5, "worsened_fraction_of_changed": 0.5,
        "mean_delta_ndcg": pytest.approx((1.0 + NDCG_RANK2 - 1.0) / 4),
    }
    manual = result.effects["manual"]
    assert (manual.changed, manual.improved, manual.worsened) == (1, 1, 0)  # B_2: [moon] either way
    assert "raw" not in result.effects


def test_strategies_get_the_earlier_turns_and_rewrite_similarity_is_scored():
    retrieve, _ = make_retriever()
    seen = []

    def spy(history, utterance):
        seen.append(([t.turn_id for t in history], utterance))
        return utterance.upper()

    result = replay_conversations(DIALOGUES, retrieve, {"spy": spy}, ks=(2,))
    assert seen == [([], "What is throat cancer?"), (["A_1"], "Is it treatable?"),
                    ([], "Tell me about the mars rover"), (["B_1"], "What about the moon?")]
    raw_scores = result.strategies["raw"].rewrite_scores
    assert raw_scores["A_1"] == {"rewrite_f1": 1.0, "rewrite_em": 1.0}
    # [is, it, treatable] vs [is, throat, cancer, treatable]: P = 2/3, R = 1/2.
    assert raw_scores["A_2"]["rewrite_f1"] == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
    assert result.strategies["manual"].means["rewrite_f1"] == 1.0
    spy_entry = result.results_for_report()["spy"]
    assert spy_entry["per_query"]["A_2"]["query"] == "IS IT TREATABLE?"
    assert spy_entry["rewrite_latency"]["count"] == 4
    assert spy_entry["latency"]["count"] == 4
    assert result.results_for_report()["raw"]["rewrite_latency"]["count"] == 0


def _records(finals):
    queries = {"A_1": "throat cancer", "A_2": "throat cancer treatable", "B_1": "mars rover", "B_2": "moon"}
    turns = {t.turn_id: t for d in DIALOGUES for t in d.turns}
    return {tid: {"original_question": turns[tid].utterance, "retrieval_query": queries[tid],
                  "retrieved_ids": {"final": ids, "dense": ["ignored"]}, "answer": "..."}
            for tid, ids in finals.items()}


def test_chat_engine_records_are_scored_as_they_are():
    retrieve, calls = make_retriever()
    records = _records({"A_1": ["throat"], "A_2": ["lung", "throat"], "B_1": ["mars"], "B_2": ["moon"]})
    result = replay_conversations(DIALOGUES, retrieve, records={"engine": records}, ks=(2,))
    assert len(calls) == 8  # raw + manual only: records are not re-retrieved
    engine = result.strategies["engine"]
    assert engine.metrics.per_query["A_2"]["ndcg@2"] == pytest.approx(NDCG_RANK2)
    assert engine.outcomes["A_2"].query == "throat cancer treatable"
    effect = result.effects["engine"]
    # A_1: [throat] vs raw [throat, lung] changed the list but not nDCG; A_2 improved.
    assert (effect.changed, effect.improved, effect.worsened, effect.tied) == (2, 1, 0, 1)


def test_logged_retrieval_queries_replay_through_another_retriever():
    retrieve, calls = make_retriever()
    records = _records({"A_1": [], "A_2": [], "B_1": [], "B_2": []})
    strategy = strategy_from_records(DIALOGUES, records)
    result = replay_conversations(DIALOGUES, retrieve, {"engine rewrite": strategy}, ks=(2,))
    assert calls[2::3] == ["throat cancer", "throat cancer treatable", "mars rover", "moon"]
    assert result.strategies["engine rewrite"].means["ndcg@2"] == 1.0
    with pytest.raises(KeyError, match="no record for 'Is it treatable\\?' after 0 earlier turns"):
        strategy([], "Is it treatable?")


def test_records_out_of_step_or_incomplete_are_rejected():
    retrieve, _ = make_retriever()
    records = _records({"A_1": ["throat"], "A_2": ["throat"], "B_1": ["mars"], "B_2": ["moon"]})
    records["A_2"] = {**records["A_2"], "original_question": "What is throat cancer?"}
    with pytest.raises(ValueError, match="out of step"):
        replay_conversations(DIALOGUES, retrieve, records={"engine": records}, ks=(2,))
    del records["A_2"]
    with pytest.raises(ValueError, match=r"records 'engine' lack 1 replayed turns, e.g. \['A_2'\]"):
        replay_conversations(DIALOGUES, retrieve, records={"engine": records}, ks=(2,))
    bad = _records({"A_1": ["throat"], "A_2": ["throat"], "B_1": ["mars"], "B_2": ["moon"]})
    bad["B_1"] = {**bad["B_1"], "retrieved_ids": ["mars"]}
    with pytest.raises(ValueError, match="retrieved_ids needs a 'final' list"):
        replay_conversations(DIALOGUES, retrieve, records={"engine": bad}, ks=(2,))


def test_collect_records_aligns_records_with_turns():
    def run_dialogue(dialogue):
        return [{"original_question": t.utterance, "retrieval_query": t.utterance,
                 "retrieved_ids": {"final": []}} for t in dialogue.turns]

    records = collect_records(DIALOGUES, run_dialogue)
    assert list(records) == ["A_1", "A_2", "B_1", "B_2", "B_3"]
    with pytest.raises(ValueError, match="dialogue 'A' has 2 turns but run_dialogue returned 0 records"):
        collect_records(DIALOGUES, lambda d: [])


def test_rewrite_only_replay_without_retrieval():
    result = replay_conversations(DIALOGUES, None, {"concat": concat_history(1)})
    assert result.effects == {} and result.effect_k is None
    assert len(result.strategies["raw"].outcomes) == 5  # every turn with a human rewrite
    assert result.strategies["manual"].means == {"rewrite_f1": 1.0, "rewrite_em": 1.0}
    assert result.strategies["raw"].metrics is None
    assert result.per_position("rewrite_em")["raw"] == {1: 1.0, 2: 0.0, 3: 1.0}


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"strategies": {"raw": concat_history(1)}}, ValueError, r"built in; rename \['raw'\]"),
    ({"strategies": {"x": "not callable"}}, TypeError, r"not callable: \['x'\]"),
    ({"effect_k": 5}, ValueError, r"effect_k must be one of ks=\[2\]"),
])
def test_bad_arguments_are_named(kwargs, error, message):
    retrieve, calls = make_retriever()
    with pytest.raises(error, match=message):
        replay_conversations(DIALOGUES, retrieve, ks=(2,), **kwargs)
    assert calls == []


def test_a_strategy_must_return_text():
    retrieve, _ = make_retriever()
    with pytest.raises(TypeError, match="strategy 'bad' returned NoneType, expected str"):
        replay_conversations(DIALOGUES, retrieve, {"bad": lambda h, u: None}, ks=(2,))


def test_rewrite_effect_needs_the_metric():
    retrieve, _ = make_retriever()
    result = replay_conversations(DIALOGUES, retrieve, ks=(2,))
    with pytest.raises(ValueError, match="ndcg@3 was not computed"):
        rewrite_effect(result.strategies["raw"], result.strategies["manual"], 3)


def test_concat_history_window():
    history = DIALOGUES[1].turns[:2]
    assert concat_history(1)(history, "x") == "What about the moon? x"
    assert concat_history(5)(history, "x") == "Tell me about the mars rover What about the moon? x"
    with pytest.raises(ValueError, match="window must be >= 1, got 0"):
        concat_history(0)


def test_contextual_plan_is_fused_and_summarised():
    from llama_index_convrag.evaluation.conversation import contextual_strategy

    retrieve, calls = make_retriever()
    result = replay_conversations(DIALOGUES, retrieve, {"contextual": contextual_strategy()}, ks=(2,))
    # A_2 needs context: the question alone and the expanded query are both retrieved, then fused.
    assert calls[3:6] == ["Is it treatable?", "Is throat cancer treatable?", "Is it treatable?"]
    assert calls[6] == "Is it treatable? throat cancer"
    outcome = result.strategies["contextual"].outcomes["A_2"]
    assert (outcome.query, outcome.top_ids(1)) == ("Is it treatable? throat cancer", ["throat"])
    summary = result.summary("ndcg@2")
    assert summary["raw"]["gap_closed"] == 0.0 and summary["manual"]["gap_closed"] == 1.0
    assert (summary["contextual"]["followups"], summary["contextual"]["worse"]) == (2, 0)
    assert summary["contextual"]["gap_closed"] == 1.0
    with pytest.raises(ValueError, match="ndcg@10 was not computed"):
        result.summary("ndcg@10")


def test_contextual_with_texts_fuses_as_the_retriever_does():
    from llama_index_convrag.evaluation.conversation import FusedQueries, contextual_strategy

    strategy = contextual_strategy(texts=CORPUS)
    plan = strategy(DIALOGUES[0].turns[:1], "Is it treatable?")
    assert isinstance(plan, FusedQueries) and plan.queries == ("Is it treatable?", "Is it treatable? throat cancer")
    retrieve, calls = make_retriever()
    result = replay_conversations(DIALOGUES, retrieve, {"contextual": strategy}, ks=(2,))
    assert calls[3:7] == ["Is it treatable?", "Is throat cancer treatable?",  # raw, manual, then both searches
                          "Is it treatable?", "Is it treatable? throat cancer"]
    assert result.strategies["contextual"].outcomes["A_2"].top_ids(1) == ["throat"]


def test_contextual_searches_its_two_queries_with_its_own_retrieve_when_given():
    from llama_index_convrag.evaluation.conversation import contextual_strategy

    retrieve, calls = make_retriever()
    deep, deep_calls = make_retriever()  # stands for the FUSION_DEPTH-deep copy the retriever fuses
    strategy = contextual_strategy(texts=CORPUS, retrieve=deep)
    result = replay_conversations(DIALOGUES, retrieve, {"contextual": strategy}, ks=(2,))
    assert "Is it treatable? throat cancer" in deep_calls and "Is it treatable? throat cancer" not in calls
    assert deep_calls[:2] == ["Is it treatable?", "Is it treatable? throat cancer"]
    assert result.strategies["contextual"].outcomes["A_2"].top_ids(1) == ["throat"]
