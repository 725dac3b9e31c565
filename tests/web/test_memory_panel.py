"""The page's "what the assistant remembers" panel in a real headless Chromium against a real ``convrag serve
--memory recall,summary,facts`` (a recent window of 2 messages): the conversation's summary written by the LLM after
the turns, the user's fact, an edit kept as a new version, clear, and forget."""

from __future__ import annotations

import re
import time
from typing import Any, Callable, Dict, Iterator

import pytest

from tests.web.conftest import Responder, require_selenium

require_selenium()

from llama_index_convrag.testing import LocalOpenAIServer  # noqa: E402
from tests.web.page import ChatPage  # noqa: E402

SERVE_ARGS = ("--memory", "recall,summary,facts", "--memory-window", "2")
SUMMARY = "The user likes zebras and asked how they sleep."
FACT = "My favourite animal is the zebra."
_MESSAGE = re.compile(r"User message:\n(.*?)\n\nFacts:", re.S)


class MemoryResponder(Responder):
    """As the module's usual LLM, and for memory's prompts: a fold gives SUMMARY, an extraction gives the user's
    message as the fact when it says "my" (else NONE), a reconcile adds."""

    def __call__(self, body: Dict[str, Any]) -> Dict[str, Any]:
        if body.get("stream"):
            return super().__call__(body)
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        prompt = users[-1]["content"] if users and isinstance(users[-1]["content"], str) else ""
        if "New summary:" in prompt or "Shortened summary:" in prompt:
            return {"content": SUMMARY}
        found = _MESSAGE.search(prompt)
        if found is not None:
            message = found.group(1).strip()
            return {"content": f"- {message}" if re.search(r"\bmy\b", message, re.I) else "NONE"}
        if prompt.rstrip().endswith("Action:"):
            return {"content": "ADD"}
        return super().__call__(body)


@pytest.fixture(scope="module")
def llm() -> Iterator[LocalOpenAIServer]:
    server = LocalOpenAIServer(chat_responder=MemoryResponder()).start()
    yield server
    server.stop()


def refreshed(page: ChatPage, condition: Callable[[], Any], what: str) -> Any:
    """``condition`` once true, pressing the panel's Refresh between looks (memory is written after each answer)."""
    last = [0.0]

    def look() -> Any:
        found = condition()
        if not found and time.monotonic() - last[0] > 0.5:
            last[0] = time.monotonic()
            page.find("#refresh-memory").click()
        return found

    return page.wait(look, what, timeout=60)


def test_the_panel_shows_edits_clears_and_forgets_what_is_remembered(browser: Any, serve_url: str,
                                                                     answer: Callable[..., None]) -> None:
    page = ChatPage(browser, serve_url)
    page.load()
    page.new_conversation()
    page.find("#toggle-memory").click()
    page.wait(lambda: page.find("#memory").get_attribute("data-loaded") == "true", "the memory panel")
    assert page.find("#memory-parts").text == "On this server: recall, summary, facts."
    assert page.find("#memory-summary").text.startswith("Start a conversation")
    answer("Zebras sleep standing up [1].")
    for question in (FACT, "How do zebras sleep?", "Do they sleep at night?"):
        page.ask(question)
        page.wait_status("complete")
    # after the third turn's writes the summary covers the 4 messages before the window (in one fold or two: the
    # writes run after each answer, and a fold reads the conversation as it is when it runs)
    refreshed(page, lambda: "written by the assistant), covers 4 messages" in page.find("#memory-summary-meta").text,
              "the summary of the 4 messages before the window")
    assert page.find("#memory-summary").text == SUMMARY
    assert "of 400 tokens" in page.find("#memory-summary-meta").text
    facts = refreshed(page, lambda: page.find_all("#fact-list li .fact-text"), "the user's fact")
    assert [f.text for f in facts] == [FACT]
    # edit: a new version
    page.find("#edit-summary").click()
    box = page.find("#summary-text")
    box.clear()
    box.send_keys("Ana likes zebras.")
    page.find("#save-summary").click()
    page.wait(lambda: page.find("#memory-summary").text == "Ana likes zebras.", "the edited summary")
    assert re.match(r"Version [23] \(your edit\), covers 4 messages", page.find("#memory-summary-meta").text)
    # clear every version
    page.find("#clear-summary").click()
    page.driver.switch_to.alert.accept()
    page.wait(lambda: page.find("#memory-summary").text == "No summary yet.", "the cleared summary")
    # forget the fact
    page.find("#fact-list li .remove").click()
    page.driver.switch_to.alert.accept()
    page.wait(lambda: page.find("#fact-list").text == "No facts about you.", "no facts left")
