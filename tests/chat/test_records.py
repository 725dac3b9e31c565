import json

import pytest

from llama_index_convrag.chat.records import TurnRecord


def test_round_trip_through_json() -> None:
    r = TurnRecord(conversation_id="c", user_message_id="u", assistant_message_id="a", original_question="它呢？",
                   retrieval_query="q", retrieved_ids={"retrieve": ["n1", "n2"]}, status="complete")
    data = json.loads(r.to_json())
    assert data["original_question"] == "它呢？" and "它" in r.to_json()
    assert TurnRecord.from_dict(data) == r


def test_unknown_fields_rejected() -> None:
    with pytest.raises(ValueError, match=r"unknown TurnRecord fields \['bogus'\]"):
        TurnRecord.from_dict({"conversation_id": "c", "user_message_id": "u", "assistant_message_id": "a",
                              "original_question": "q", "bogus": 1})


def test_to_dict_is_an_independent_copy_equal_to_asdict():
    from dataclasses import asdict

    r = TurnRecord(conversation_id="c", user_message_id="u", assistant_message_id="a", original_question="q",
                   retrieved_ids={"retrieve": ["n1", "n2"]}, trim_report={"kept_history": [0, 1], "dropped": [{"i": 2}]},
                   citations=[{"node_id": "n1"}])
    d = r.to_dict()
    assert d == asdict(r)
    d["retrieved_ids"]["retrieve"].append("x")
    d["trim_report"]["dropped"][0]["i"] = 9
    d["citations"][0]["node_id"] = "y"
    assert r.retrieved_ids == {"retrieve": ["n1", "n2"]} and r.trim_report["dropped"] == [{"i": 2}]
    assert r.citations == [{"node_id": "n1"}]


def test_answer_source_and_grounding_round_trip_and_older_records_load_without_them():
    grounding = {"method": "lexical", "support_share": 0.5, "judged": 1,
                 "unsupported": [{"sentence": 0, "text": "x y.", "best_source": None, "overlap": 0.0}]}
    r = TurnRecord(conversation_id="c", user_message_id="u", assistant_message_id="a", original_question="q",
                   answer_source="llm_retry_without_citations", grounding=grounding)
    assert TurnRecord.from_dict(json.loads(r.to_json())) == r
    older = {"conversation_id": "c", "user_message_id": "u", "assistant_message_id": "a", "original_question": "q"}
    loaded = TurnRecord.from_dict(older)
    assert (loaded.answer_source, loaded.grounding) == (None, None)
