"""QuestionRewriter with a ScriptedLLM: exact prompts, call counts, windows, fallbacks and the cache."""

import asyncio
from typing import List

import pytest
from llama_index.core.base.llms.types import ChatMessage

from llama_index_convrag.conversational.rewrite import QuestionRewriter, fit_history, select_history
from llama_index_convrag.prompts.chat import DEFAULT_CONDENSE_TEMPLATE
from llama_index_convrag.testing import ScriptedLLM


def words(text: str) -> int:
    return len(text.split())


def conv(*pairs: str) -> List[ChatMessage]:
    out = []
    for i, text in enumerate(pairs):
        out.append(ChatMessage(role="user" if i % 2 == 0 else "assistant", content=text))
    return out


HISTORY = conv("u1", "a1", "u2", "a2", "u3", "a3", "u4", "a4")


def test_select_history_last_n_user_turns() -> None:
    assert select_history(HISTORY, 3) == [2, 3, 4, 5, 6, 7]
    assert select_history(HISTORY, 3, user_only=True) == [2, 4, 6]
    assert select_history(HISTORY, 10) == list(range(8))
    assert select_history(HISTORY, 0) == []


def test_llm_prompt_is_exact_and_windowed() -> None:
    llm = ScriptedLLM.fixed("standalone q")
    rw = QuestionRewriter(llm=llm, trigger=None, count_tokens=words)
    res = rw.rewrite("and it?", HISTORY)
    assert (res.query, res.strategy, res.used_llm, res.fallback_reason) == ("standalone q", "llm", True, None)
    expected = DEFAULT_CONDENSE_TEMPLATE.format(
        chat_history="user: u2\nassistant: a2\nuser: u3\nassistant: a3\nuser: u4\nassistant: a4",
        question="and it?")
    assert llm.prompts == [expected]


def test_token_cap_keeps_user_turns_before_answers() -> None:
    llm = ScriptedLLM.fixed("q")
    rw = QuestionRewriter(llm=llm, trigger=None, count_tokens=words, max_history_tokens=4)
    res = rw.rewrite("it?", HISTORY)
    assert "<Chat History>\nuser: u3\nuser: u4\n" in llm.prompts[0]
    assert res.shortened_answers == 3


def test_no_history_no_call_and_trigger_skip() -> None:
    llm = ScriptedLLM.fixed("q")
    rw = QuestionRewriter(llm=llm, count_tokens=words)
    assert rw.rewrite("When was it built?", []).skipped_reason == "no history"
    res = rw.rewrite("What is the capital city of France today?", HISTORY)
    assert (res.query, res.skipped_reason, llm.call_count) == (
        "What is the capital city of France today?", "trigger: self-contained", 0)
    rw.rewrite("When was it built?", HISTORY)
    assert llm.call_count == 1


def test_concat_and_none_need_no_llm() -> None:
    res = QuestionRewriter(strategy="concat", count_tokens=words, trigger=None).rewrite("and it?", HISTORY)
    assert (res.query, res.used_llm) == ("u2\nu3\nu4\nand it?", False)
    res = QuestionRewriter(strategy="none", count_tokens=words).rewrite("and it?", HISTORY)
    assert (res.query, res.skipped_reason) == ("and it?", "strategy none")


@pytest.mark.parametrize("llm, reason", [
    (ScriptedLLM.fixed("   "), "rewrite returned empty output"),
    (ScriptedLLM.fixed("It was built in 1889."),
     "rewrite rejected: looks like an answer, not a question: 'It was built in 1889.'"),
    (ScriptedLLM.fixed("x", fail_on_call=0), "rewrite failed: ScriptedFailure: scripted failure on call 0"),
])
def test_fallback_to_original_with_reason(llm: ScriptedLLM, reason: str) -> None:
    res = QuestionRewriter(llm=llm, trigger=None, count_tokens=words).rewrite("and it?", HISTORY)
    assert (res.query, res.fallback_reason, res.used_llm) == ("and it?", reason, True)


def test_cache_keyed_by_ids_message_and_model() -> None:
    llm = ScriptedLLM.cycle(["first", "second", "third"])
    rw = QuestionRewriter(llm=llm, trigger=None, count_tokens=words)
    ids = [f"m{i}" for i in range(len(HISTORY))]
    assert rw.rewrite("it?", HISTORY, history_ids=ids, message_id="x").query == "first"
    hit = rw.rewrite("it?", HISTORY, history_ids=ids, message_id="x")
    assert (hit.query, hit.cache_hit, llm.call_count) == ("first", True, 1)
    assert rw.rewrite("it?", HISTORY, history_ids=ids, message_id="y").query == "second"
    assert rw.rewrite("it?", HISTORY, history_ids=ids[:-1] + ["other"], message_id="x").query == "third"
    other_model = QuestionRewriter(llm=ScriptedLLM.fixed("z", model_name="m2"), trigger=None, count_tokens=words)
    other_model._cache = rw._cache  # same cache, different model name: a miss
    assert other_model.rewrite("it?", HISTORY, history_ids=ids, message_id="x").query == "z"


def test_async_twin_matches() -> None:
    llm = ScriptedLLM.fixed("standalone")
    rw = QuestionRewriter(llm=llm, trigger=None, count_tokens=words)
    res = asyncio.run(rw.arewrite("and it?", HISTORY))
    assert (res.query, llm.call_count) == ("standalone", 1)


@pytest.mark.parametrize("kwargs, message", [
    ({"strategy": "magic"}, r"rewrite strategy must be one of \['llm', 'contextual', 'concat', 'none'\], got 'magic'"),
    ({"strategy": "llm"}, r"rewrite strategy 'llm' needs a condense llm"),
    ({"strategy": "none", "last_n_turns": -1}, r"last_n_turns must be >= 0, got -1"),
    ({"strategy": "none", "max_history_tokens": 0}, r"max_history_tokens must be >= 1, got 0"),
])
def test_validation(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        QuestionRewriter(count_tokens=words, **kwargs)


def test_prompt_mixin_update() -> None:
    from llama_index.core.prompts import PromptTemplate

    llm = ScriptedLLM.fixed("q")
    rw = QuestionRewriter(llm=llm, trigger=None, count_tokens=words)
    rw.update_prompts({"condense_prompt": PromptTemplate("H={chat_history} Q={question}")})
    rw.rewrite("it?", conv("u1", "a1"))
    assert llm.prompts == ["H=user: u1\nassistant: a1 Q=it?"]


def test_cleaning_steps_are_recorded() -> None:
    llm = ScriptedLLM.fixed('Standalone question: "When was the Eiffel Tower built?"')
    res = QuestionRewriter(llm=llm, trigger=None, count_tokens=words).rewrite("When was it built?", HISTORY)
    assert (res.query, res.cleaning, res.fallback_reason) == ("When was the Eiffel Tower built?", ("label", "quotes"),
                                                              None)


# --- fitting the window (issue 12, bug 3) ---------------------------------------------------------------------------
LONG_ANSWER = " ".join(f"w{i}" for i in range(50))


def test_fit_history_shortens_answers_and_keeps_user_turns() -> None:
    window = conv("u1 x", LONG_ANSWER, "u2 y", LONG_ANSWER)
    fmt = lambda ms: " ".join(m.content or "" for m in ms)  # noqa: E731 - 1 token per word
    out, shortened = fit_history(window, 24, words, fmt)
    # 4 user words + 2 answers of 9 words + 2 marks = 24 tokens; a 10-word head would need 26
    head = " ".join(f"w{i}" for i in range(9)) + " …"
    assert [m.content for m in out] == ["u1 x", head, "u2 y", head]
    assert shortened == 2


def test_fit_history_drops_answers_then_oldest_users_then_cuts_the_last() -> None:
    fmt = lambda ms: " ".join(m.content or "" for m in ms)  # noqa: E731
    window = conv("u1 a b", LONG_ANSWER, "u2 c d", LONG_ANSWER)
    assert fit_history(window, 4, words, fmt) == ([window[2]], 2)
    assert fit_history(window, 2, words, fmt)[0] == [ChatMessage(role="user", content="u2 …")]  # the mark: 1 word
    assert fit_history(window, 106, words, fmt) == (window, 0)


def test_fit_history_cuts_chinese_by_characters() -> None:
    fmt = lambda ms: "".join(m.content or "" for m in ms)  # noqa: E731
    window = conv("它多高？", "埃菲尔铁塔高三百三十米，位于巴黎。")
    out, shortened = fit_history(window, 10, len, fmt)  # 1 token per character
    assert ([m.content for m in out], shortened) == (["它多高？", "埃菲尔铁 …"], 1)


def test_long_previous_answer_no_longer_skips_the_rewrite() -> None:
    """Bug 3: one assistant answer over max_history_tokens emptied the window and skipped the rewrite."""
    llm = ScriptedLLM.fixed("When was the Eiffel Tower built?")
    rw = QuestionRewriter(llm=llm, trigger=None)  # the real default token counter
    answer = "The Eiffel Tower is a wrought-iron lattice tower in Paris. " * 150  # ~1,800 tokens
    assert rw.count_tokens(answer) > rw.max_history_tokens
    res = rw.rewrite("When was it built?", conv("Tell me about the Eiffel Tower.", answer))
    assert (res.query, res.skipped_reason, res.shortened_answers, llm.call_count) == (
        "When was the Eiffel Tower built?", None, 1, 1)
    history = llm.prompts[0].split("<Chat History>\n")[1].split("\n\n<Follow Up Message>")[0]
    assert history.startswith("user: Tell me about the Eiffel Tower.\nassistant: The Eiffel Tower is")
    assert history.endswith(" …")
    assert rw.max_history_tokens - 20 < rw.count_tokens(history) <= rw.max_history_tokens


def test_real_model_repeating_the_first_question_falls_back() -> None:
    """Qwen2.5-Coder-0.5B-Instruct's exact reply to this conversation (llama.cpp server, greedy)."""
    llm = ScriptedLLM.fixed("Who directed Inception?")
    history = conv("Who directed Inception?", "Christopher Nolan directed Inception (2010).")
    res = QuestionRewriter(llm=llm, trigger=None).rewrite("What other films did he direct?", history)
    assert (res.query, res.fallback_reason) == (
        "What other films did he direct?", "rewrite rejected: repeats an earlier question: 'Who directed Inception?'")
