"""parse_rewrite / clean_rewrite: the wrappings real models put around a condensed question (EN + ZH)."""

import pytest

from llama_index_convrag.conversational.rewrite_output import (MAX_REWRITE_CHARS, ParsedRewrite, clean_rewrite, looks_like_answer,
                                                     parse_rewrite)


@pytest.mark.parametrize("reply, query, steps", [
    ("Who directed Inception?", "Who directed Inception?", ()),
    ('  Standalone question: "Who is Nolan?" \n', "Who is Nolan?", ("label", "quotes")),
    ("Rewritten question: When was it built?", "When was it built?", ("label",)),
    ("**Standalone question:** Who is Nolan?", "Who is Nolan?", ("label",)),
    ("Sure! Here is the standalone question: Who is Nolan?", "Who is Nolan?", ("label",)),
    ("Here's the rewritten question:\nWho is Nolan?", "Who is Nolan?", ("preamble line",)),
    ("```\nWho is Nolan?\n```", "Who is Nolan?", ("code fence",)),
    ("```text\n\"Who is Nolan?\"\n```", "Who is Nolan?", ("code fence", "quotes")),
    ("“Who is Nolan?”", "Who is Nolan?", ("quotes",)),
    ("*Who is Nolan?*", "Who is Nolan?", ("emphasis",)),
    ("Who is Nolan?\nNolan is a British director.", "Who is Nolan?", ("kept 1 of 2 lines",)),
    ("Nolan is a director.\n- Who is Nolan?", "Who is Nolan?", ("kept 1 of 2 lines",)),
    ("改写后的问题：埃菲尔铁塔有多高？", "埃菲尔铁塔有多高？", ("label",)),
    ("独立问题：「埃菲尔铁塔是哪一年建成的？」", "埃菲尔铁塔是哪一年建成的？", ("label", "quotes")),
    ("Tell me more about the history of the Eiffel Tower.", "Tell me more about the history of the Eiffel Tower.",
     ()),
])
def test_cleans_wrappings(reply: str, query: str, steps: tuple) -> None:
    assert parse_rewrite(reply, "And it?") == ParsedRewrite(query, steps)


@pytest.mark.parametrize("reply, question, rejected", [
    ("", "and it?", "empty output"),
    ("```\n```", "and it?", "empty output"),
    ('""', "and it?", "empty output"),
    ("I'm sorry, I cannot help with that?", "and it?", "refusal: \"I'm sorry, I cannot help with that?\""),
    ("抱歉，我无法回答。", "它多高？", "refusal: '抱歉，我无法回答。'"),
    ("It was built in 1889.", "When was it built?", "looks like an answer, not a question: 'It was built in 1889.'"),
    ("埃菲尔铁塔高330米。", "它多高？", "looks like an answer, not a question: '埃菲尔铁塔高330米。'"),
    ("What " + "x" * MAX_REWRITE_CHARS + "?", "and it?",
     f"too long for a question ({MAX_REWRITE_CHARS + 6} > {MAX_REWRITE_CHARS} chars)"),
])
def test_rejects_with_reason(reply: str, question: str, rejected: str) -> None:
    assert parse_rewrite(reply, question).rejected == rejected
    assert parse_rewrite(reply, question).query is None


def test_statements_accepted_when_nothing_was_asked_and_keywords_always() -> None:
    assert parse_rewrite("The tower was built in 1889.", "tell me more").query == "The tower was built in 1889."
    assert parse_rewrite("It was built in 1889.").query == "It was built in 1889."  # no question given
    assert parse_rewrite("Eiffel Tower height", "How tall is it?").query == "Eiffel Tower height"
    assert parse_rewrite("埃菲尔铁塔 高度", "它多高？").query == "埃菲尔铁塔 高度"


@pytest.mark.parametrize("reply, question, answer", [
    ("It was built in 1889.", "When was it built?", True),
    ("It was built in 1889. It is tall", "when was it built", True),
    ("Tell me more about the tower.", "And its height?", False),
    ("When was the tower built.", "When was it built?", False),
    ("埃菲尔铁塔高330米。", "它多高", True),
    ("请介绍埃菲尔铁塔的历史。", "它的历史呢？", False),
])
def test_looks_like_answer(reply: str, question: str, answer: bool) -> None:
    assert looks_like_answer(reply, question) is answer


def test_clean_rewrite_returns_text() -> None:
    assert clean_rewrite('Standalone question: "Who is Nolan?"') == "Who is Nolan?"
    assert clean_rewrite("   ") == ""


def test_unchanged_reply_is_kept_and_marked() -> None:
    """Qwen2.5-0.5B returned the Chinese follow-up as it was (history: 埃菲尔铁塔在哪里？ / 位于法国巴黎)."""
    assert parse_rewrite("它有多高？", "它有多高？") == ParsedRewrite("它有多高？", ("unchanged",))


def test_repeat_of_an_earlier_question_is_rejected() -> None:
    """Qwen2.5-0.5B answered the follow-up "What other films did he direct?" with the first question."""
    assert parse_rewrite("Who directed Inception?", "What other films did he direct?",
                         ["Who directed Inception?"]) == ParsedRewrite(
        None, (), "repeats an earlier question: 'Who directed Inception?'")
