import json

import pytest

from llama_index_convrag.evaluation.datasets import (available_splits, cast_passage_corpus, dialogue_qrels,
                                                     load_beir, load_canard, load_cast_turns, load_qrels)


def _write_beir(root, qrels_text="query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\nq2\td3\t2\n"):
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in [
        {"_id": "d1", "title": "T1", "text": "one"}, {"_id": "d2", "title": "", "text": "two"},
        {"_id": "d3", "title": "T3", "text": "three", "metadata": {"year": 1}}, {"_id": "d4", "text": "four"},
    ]) + "\n", encoding="utf-8")
    (root / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in [
        {"_id": "q1", "text": "first"}, {"_id": "q2", "text": "second"}, {"_id": "q9", "text": "unjudged"},
    ]) + "\n\n", encoding="utf-8")
    (root / "qrels" / "test.tsv").write_text(qrels_text, encoding="utf-8")
    return root


def test_load_beir_hand_built(tmp_path):
    ds = load_beir(_write_beir(tmp_path / "tiny"))
    assert (ds.name, ds.split) == ("tiny", "test")
    assert list(ds.queries) == ["q1", "q2"]  # only queries judged in the split
    assert ds.qrels == {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}}
    assert ds.corpus["d1"].full_text == "T1\none"
    assert ds.corpus["d2"].full_text == "two"
    assert ds.corpus["d3"].metadata == {"year": 1}
    sub = ds.subset(1, corpus_size=3)
    assert list(sub.queries) == ["q1"]
    assert list(sub.corpus) == ["d1", "d2", "d3"]  # judged d1, then padding in file order
    assert sub.qrels == {"q1": {"d1": 1, "d2": 0}}
    with pytest.raises(ValueError, match="corpus_size=1 is smaller than the 2 documents judged relevant"):
        ds.subset(2, corpus_size=1)


def test_beir_errors_name_the_problem(tmp_path):
    root = _write_beir(tmp_path / "tiny")
    with pytest.raises(ValueError, match=r"split must be one of \['test'\], got 'train'"):
        load_beir(root, split="train")
    (root / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\n", encoding="utf-8")
    assert available_splits(root) == ["dev", "test"]
    with pytest.raises(ValueError, match=r"choose a split, one of \['dev', 'test'\]"):
        load_beir(root)
    with pytest.raises(FileNotFoundError, match="BEIR data folder not found: '.*nowhere'"):
        load_beir(tmp_path / "nowhere")
    bad = _write_beir(tmp_path / "bad", qrels_text="q1\td1\t1\n")
    with pytest.raises(ValueError, match="expected a header 'query-id<TAB>corpus-id<TAB>score'"):
        load_qrels(bad / "qrels" / "test.tsv")
    orphan = _write_beir(tmp_path / "orphan", qrels_text="query-id\tcorpus-id\tscore\nq7\td1\t1\n")
    with pytest.raises(ValueError, match=r"1 judged queries are absent from queries.jsonl, e.g. \['q7'\]"):
        load_beir(orphan)


def test_shared_beir_collections(shared_data):
    cranfield = load_beir(shared_data / "cranfield")
    assert (len(cranfield.corpus), len(cranfield.queries), cranfield.split) == (1400, 225, "test")
    assert sum(len(v) for v in cranfield.qrels.values()) == 1837
    scifact = load_beir(shared_data / "scifact", split="train")
    assert (len(scifact.corpus), len(scifact.queries)) == (5183, 809)
    assert sum(len(v) for v in scifact.qrels.values()) == 919


def test_shared_cast_turns(shared_data):
    dialogues = load_cast_turns(shared_data / "trec_cast" / "turns.jsonl", years=[2021])
    assert (len(dialogues), sum(len(d.turns) for d in dialogues)) == (26, 239)
    first = dialogues[0].turns[1]
    assert (first.turn_id, first.dialogue_id, first.position) == ("106_2", "106", 2)
    assert first.utterance == "Once it breaks out, how likely is it to spread?"
    assert first.rewrite == "Once it breaks out, how likely is lobular carcinoma breast cancer to spread?"
    assert first.relevant == {"MARCO_D684514": 1}
    corpus = cast_passage_corpus(dialogues)
    assert len(corpus) == 210  # distinct canonical ids
    assert set(corpus) == {d for q in dialogue_qrels(dialogues).values() for d in q}
    everything = load_cast_turns(shared_data / "trec_cast" / "turns.jsonl")
    ids = [t.turn_id for d in everything for t in d.turns]
    assert len(ids) == 1218 and len(set(ids)) == 1218  # 2022 ids qualified by their path
    assert {d.metadata["year"] for d in everything} == {2019, 2020, 2021, 2022}


def test_shared_canard(shared_data):
    dialogues = load_canard(shared_data / "canard" / "dialogues_dev.jsonl")
    assert len(dialogues) == 490 and sum(len(d.turns) for d in dialogues) == 3430
    turn = dialogues[0].turns[1]
    assert (turn.utterance, turn.rewrite) == ("When did they disband?",
                                              "When did Zappa and the Mothers of Invention disband?")
    assert turn.relevant == {}
    assert len(load_canard(shared_data / "canard" / "dialogues_dev.jsonl", max_dialogues=3)) == 3
