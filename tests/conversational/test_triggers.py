"""The rewrite trigger rule on hand-written English and Chinese follow-ups."""

import pytest

from llama_index_convrag.conversational.triggers import TriggerRules, needs_rewrite


@pytest.mark.parametrize("question, reason", [
    ("When was it released?", "pronoun 'it'"),
    ("Who starred in that one?", "pronoun 'one'"),
    ("What did they find?", "pronoun 'they'"),
    ("Is the latter faster than BM25 on long queries?", "pronoun 'latter'"),
    ("What about Germany?", "ellipsis"),
    ("And the population of Lyon?", "ellipsis"),
    ("Why?", "short follow-up (1 words)"),
    ("Population of Lyon", "short follow-up (3 words)"),
    ("它是什么时候上映的？", "reference word '它'"),
    ("那个导演还拍过什么电影", "reference word '那个'"),
    ("前者的票房是多少", "reference word '前者'"),
    ("后者的评分怎么样", "reference word '后者'"),
    ("这部电影讲的是什么故事", "reference word '这部'"),
    ("这位科学家获得过什么奖项", "reference word '这位'"),
    ("那上海呢？", "elliptical ending"),
    ("票房多少", "short follow-up (4 characters)"),
])
def test_follow_ups_trigger(question: str, reason: str) -> None:
    assert needs_rewrite(question) == (True, reason)


@pytest.mark.parametrize("question", [
    "Who directed the film Inception in 2010?",
    "What is the capital city of France today?",
    "How does BM25 rank documents for a query?",
    "北京有哪些著名的博物馆和历史建筑值得参观",
    "",
])
def test_self_contained_questions_do_not_trigger(question: str) -> None:
    assert needs_rewrite(question).rewrite is False


def test_short_thresholds_are_parameters() -> None:
    assert needs_rewrite("Population of Lyon", TriggerRules(max_short_words=2)).rewrite is False
    with pytest.raises(ValueError, match="max_short_words must be an int >= 0, got -1"):
        TriggerRules(max_short_words=-1)
