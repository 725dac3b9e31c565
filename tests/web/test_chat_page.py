"""The chat page in a real headless Chromium against a real ``convrag serve`` (see conftest.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.web.conftest import require_selenium

require_selenium()

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

from llama_index_convrag.testing import LocalOpenAIServer  # noqa: E402
from tests.web.conftest import Served  # noqa: E402
from tests.web.page import ChatPage  # noqa: E402

LONG_ANSWER = " ".join(f"word{i}" for i in range(60)) + " [1]."


@pytest.fixture
def page(browser: Any, serve_url: str) -> Iterator[ChatPage]:
    browser.set_window_size(1280, 860)
    chat = ChatPage(browser, serve_url)
    chat.load()
    chat.new_conversation()
    yield chat


def test_answer_streams_token_by_token_then_completes(page: ChatPage, answer: Callable[..., None],
                                                       screenshots: Callable[..., Any]) -> None:
    answer("Zebras sleep standing up in short naps [1]. A herd keeps watch for lions.", seconds_per_word=0.2)
    # the engine's default citation mode cites the sentence the model left uncited with the passage holding it
    text = "Zebras sleep standing up in short naps [1]. A herd keeps watch for lions [1]."
    page.ask("How do zebras sleep?")
    partial = page.wait(lambda: page.last_answer().get_attribute("data-status") == "pending"
                        and page.text_of(page.last_answer()).strip(), "the first streamed words")
    screenshots(page.driver, "streaming")
    shown = page.text_of(page.wait_status("complete"))
    assert text.startswith(partial) and len(partial) < len(text)
    assert shown == text
    assert page.find("#stop").get_attribute("hidden") is not None
    mode = page.find("#mode")  # the header says an LLM answers (the server's /v1/health names it)
    assert mode.get_attribute("hidden") is None and mode.text == "Answers by scripted"
    assert page.find("#send").get_attribute("hidden") is None


def test_citation_marker_opens_the_passage_with_file_and_chunk(page: ChatPage, answer: Callable[..., None],
                                                               screenshots: Callable[..., Any]) -> None:
    answer("Zebras sleep standing up [1].")
    page.ask("How do zebras sleep?")
    done = page.wait_status("complete")
    assert page.find("#passage").get_attribute("hidden") is not None
    done.find_element(By.CSS_SELECTOR, ".cite[data-marker='1']").click()
    page.wait(lambda: page.find("#passage").get_attribute("hidden") is None, "the passage panel")
    assert page.find("#passage-heading").text == "Source [1]"
    assert page.find("#passage-file").text.endswith("zebras.md")
    assert page.find("#passage-chunk").text
    assert "Zebras sleep standing up in short naps." in page.find("#passage-text").get_property("textContent")
    screenshots(page.driver, "citation")


def test_a_long_passage_scrolls_inside_its_panel(page: ChatPage, answer: Callable[..., None]) -> None:
    page.driver.set_window_size(1280, 560)  # the passage box is at most half the window high
    answer("The keepers trimmed the lamp [1].")
    page.ask("What did the lighthouse keepers log?")
    page.wait_status("complete").find_element(By.CSS_SELECTOR, ".cite[data-marker='1']").click()
    page.wait(lambda: page.find("#passage-file").text.endswith("lighthouses.md"), "the lighthouse passage")
    box = page.find("#passage-text")
    assert box.get_property("scrollHeight") > box.get_property("clientHeight") + 100
    page.driver.execute_script("arguments[0].scrollTop = 100", box)
    assert box.get_property("scrollTop") == 100
    assert page.driver.execute_script("return window.scrollY") == 0


def test_sources_row_numbers_match_the_markers(page: ChatPage, answer: Callable[..., None]) -> None:
    answer("Zebras nap standing [1] and Milvus stores vectors [2].")
    page.ask("How do zebras sleep and what does Milvus store?")
    done = page.wait_status("complete")
    labels = [b.text for b in done.find_elements(By.CSS_SELECTOR, ".sources .source")]
    assert labels and all(label.startswith(f"[{i}] ") for i, label in enumerate(labels, start=1))
    for n in (1, 2):
        done = page.last_answer()
        done.find_element(By.CSS_SELECTOR, f".cite[data-marker='{n}']").click()
        page.wait(lambda: page.find("#passage-heading").text == f"Source [{n}]", f"source [{n}]")
        assert labels[n - 1].endswith(page.find("#passage-file").text.rsplit("/", 1)[-1])


def test_searched_for_shows_the_retrieval_query_on_demand(page: ChatPage, answer: Callable[..., None]) -> None:
    answer("Milvus Lite keeps the database in one file [1].")
    page.ask("Where does Milvus Lite keep its data?")
    done = page.wait_status("complete")
    query = done.find_element(By.CSS_SELECTOR, ".query")
    assert not query.is_displayed()
    done.find_element(By.CSS_SELECTOR, ".searched").click()
    page.wait(query.is_displayed, "the retrieval query")
    assert query.text.startswith("searched for: ")
    assert "Milvus Lite" in query.text


def test_reload_brings_the_conversation_back(page: ChatPage, answer: Callable[..., None]) -> None:
    answer("Green tea is not fermented [1].")
    page.ask("Is green tea fermented?")
    page.wait_status("complete")
    title = page.find("#conversation-title").text
    page.reload()
    page.wait(lambda: len(page.contents()) == 2, "the two stored messages")
    assert page.contents() == ["Is green tea fermented?", "Green tea is not fermented [1]."]
    assert page.find("#conversation-title").text == title == "Is green tea fermented?"
    assert page.last_answer().get_attribute("data-status") == "complete"


def test_stop_leaves_a_cancelled_answer_with_retry_that_survives_reload(
        page: ChatPage, answer: Callable[..., None], screenshots: Callable[..., Any]) -> None:
    answer(LONG_ANSWER, seconds_per_word=0.15)
    page.ask("Tell me everything about zebras.")
    page.wait(lambda: "word2" in page.text_of(page.last_answer()), "a few streamed words")
    page.find("#stop").click()
    cancelled = page.wait_status("cancelled")
    partial = page.text_of(cancelled)
    assert "word2" in partial and LONG_ANSWER.startswith(partial.rstrip()) and len(partial) < len(LONG_ANSWER)
    assert cancelled.find_element(By.CSS_SELECTOR, ".status").text == "cancelled"
    assert cancelled.find_element(By.CSS_SELECTOR, ".retry").is_displayed()
    screenshots(page.driver, "cancelled")
    page.reload()
    again = page.wait_status("cancelled")
    assert page.text_of(again) == partial
    assert again.find_element(By.CSS_SELECTOR, ".retry").is_displayed()


def test_an_interrupted_answer_shows_its_text_and_retry_answers(page: ChatPage, answer: Callable[..., None],
                                                                served: Served) -> None:
    import httpx

    from llama_index_convrag.storage.conversation import SQLiteConversationStore

    answer("Zebras sleep standing up [1].")
    page.ask("Where do zebras nap?")
    page.wait_status("complete")
    conversations = httpx.get(f"{served.url}/v1/conversations", timeout=30).json()["data"]
    cid = next(c["id"] for c in conversations if c["title"] == "Where do zebras nap?")
    store = SQLiteConversationStore(served.workdir / "chats.db")
    try:  # what a server killed mid-answer leaves once restarted: the question, the saved text, 'interrupted'
        _, left = store.begin_turn(cid, "And at night?")
        store.save_partial(cid, left.id, "A herd keeps")
        store.interrupt_pending([cid])
    finally:
        store.close()
    page.reload()
    interrupted = page.wait_status("interrupted")
    assert page.text_of(interrupted) == "A herd keeps"
    assert interrupted.find_element(By.CSS_SELECTOR, ".status").text.startswith("interrupted")
    answer("A herd keeps watch for lions at night [1].")
    interrupted.find_element(By.CSS_SELECTOR, ".retry").click()
    assert page.text_of(page.wait_status("complete")) == "A herd keeps watch for lions at night [1]."


def test_keyboard_only_enter_asks_and_escape_stops(page: ChatPage, answer: Callable[..., None]) -> None:
    answer(LONG_ANSWER, seconds_per_word=0.15)
    page.driver.switch_to.active_element.send_keys("Tell me about zebra stripes.\n")  # the question box has focus
    page.wait(page.answers, "the answer placeholder")
    page.wait(lambda: "word2" in page.text_of(page.last_answer()), "a few streamed words")
    page.driver.switch_to.active_element.send_keys(Keys.ESCAPE)
    assert page.text_of(page.wait_status("cancelled")).startswith("word0 word1 word2")
    assert page.driver.switch_to.active_element.get_attribute("id") == "question"


def test_retry_gives_a_new_answer_and_keeps_the_earlier_version(page: ChatPage,
                                                                 answer: Callable[..., None]) -> None:
    answer(LONG_ANSWER, seconds_per_word=0.15)
    page.ask("Tell me about zebra herds.")
    page.wait(lambda: "word2" in page.text_of(page.last_answer()), "a few streamed words")
    page.find("#stop").click()
    partial = page.text_of(page.wait_status("cancelled"))
    answer("A herd keeps watch for lions at night [1].")
    page.last_answer().find_element(By.CSS_SELECTOR, ".retry").click()
    done = page.wait_status("complete")
    assert page.text_of(done) == "A herd keeps watch for lions at night [1]."
    assert len(page.answers()) == 1
    assert done.find_element(By.CSS_SELECTOR, ".version-label").text == "version 2 of 2"
    done.find_element(By.CSS_SELECTOR, ".prev-version").click()
    page.wait(lambda: page.last_answer().get_attribute("data-status") == "cancelled", "the earlier version")
    assert page.text_of(page.last_answer()) == partial
    assert page.last_answer().find_element(By.CSS_SELECTOR, ".version-label").text == "version 1 of 2"


def test_a_failed_answer_shows_why_and_retry_answers(page: ChatPage, answer: Callable[..., None],
                                                     llm: LocalOpenAIServer) -> None:
    answer("Zebras sleep standing up [1].")
    llm.fail_next(500, times=20)  # more than the OpenAI client's retries
    page.ask("How do zebras sleep?")
    failed = page.wait_status("error", timeout=60)
    status = failed.find_element(By.CSS_SELECTOR, ".status").text
    assert status.startswith("failed: ")
    assert failed.find_element(By.CSS_SELECTOR, ".retry").is_displayed()
    llm.clear()
    page.last_answer().find_element(By.CSS_SELECTOR, ".retry").click()
    assert page.text_of(page.wait_status("complete")) == "Zebras sleep standing up [1]."


def test_markup_in_an_answer_shows_as_text(page: ChatPage, answer: Callable[..., None]) -> None:
    text = 'Markup: <script>window.__pwned = 1</script><b>bold</b><img src=x onerror="window.__pwned = 2"> [1]'
    answer(text)
    page.ask("Show me some markup.")
    done = page.wait_status("complete")
    assert page.text_of(done) == text
    assert page.driver.execute_script("return window.__pwned === undefined")
    assert not done.find_elements(By.CSS_SELECTOR, "script, b, img")


def test_chinese_question_and_answer_render(page: ChatPage, answer: Callable[..., None],
                                            screenshots: Callable[..., Any]) -> None:
    answer("乌龙茶是半发酵的茶 [1]。")
    page.ask("乌龙茶是什么？")
    done = page.wait_status("complete")
    assert page.contents()[-2:] == ["乌龙茶是什么？", "乌龙茶是半发酵的茶 [1]。"]
    done.find_element(By.CSS_SELECTOR, ".cite[data-marker='1']").click()
    page.wait(lambda: page.find("#passage").get_attribute("hidden") is None, "the passage panel")
    assert page.find("#passage-file").text.endswith("茶.md")
    assert "乌龙茶是半发酵的茶" in page.find("#passage-text").get_property("textContent")
    screenshots(page.driver, "chinese")


def test_feedback_is_stored_and_shown_after_reload(page: ChatPage, answer: Callable[..., None]) -> None:
    answer("Zebras nap standing [1].")
    page.ask("Do zebras lie down to sleep?")
    done = page.wait_status("complete")
    done.find_element(By.CSS_SELECTOR, ".rate.down").click()
    page.wait(lambda: page.find("#messages .rate.down").get_attribute("aria-pressed") == "true", "the pressed rating")
    assert page.find("#messages .rate.up").get_attribute("aria-pressed") == "false"
    page.reload()
    page.wait(lambda: page.find("#messages .rate.down").get_attribute("aria-pressed") == "true",
              "the stored rating after reload")


def test_rename_and_delete_a_conversation(page: ChatPage, answer: Callable[..., None]) -> None:
    answer("Lions hunt at night [1].")
    page.ask("When do lions hunt?")
    page.wait_status("complete")
    current = page.find("#conversation-list .open[aria-current='true']")
    item = current.find_element(By.XPATH, "..")
    conversation_id = item.get_attribute("data-id")
    item.find_element(By.CSS_SELECTOR, ".rename").click()
    box = page.find("#conversation-list .title-input")
    box.clear()
    box.send_keys("Lions 狮子 <i>night</i>\n")
    selector = f"#conversation-list li[data-id='{conversation_id}'] .open"
    page.wait(lambda: page.find(selector).text == "Lions 狮子 <i>night</i>", "the new title")
    assert page.find("#conversation-title").text == "Lions 狮子 <i>night</i>"
    page.find(f"#conversation-list li[data-id='{conversation_id}'] .delete").click()
    page.driver.switch_to.alert.accept()
    page.wait(lambda: not page.find_all(selector), "the deleted conversation to leave the list")
    assert page.contents() == []
    page.reload()
    assert not page.find_all(selector)


def test_upload_a_file_then_ask_about_it(page: ChatPage, answer: Callable[..., None], tmp_path: Path,
                                         screenshots: Callable[..., Any]) -> None:
    owls = tmp_path / "owls.md"
    owls.write_text("# Owls\n\nBarn owls hunt voles and mice by sound alone, in complete darkness.\n",
                    encoding="utf-8")
    page.find("#toggle-docs").click()
    page.wait(lambda: page.find("#docs").is_displayed(), "the documents panel")
    names = lambda: [e.text for e in page.find_all("#document-list .doc-name")]  # noqa: E731
    page.wait(lambda: "zebras.md" in names(), "the ingested documents")
    page.find("#upload").send_keys(str(owls))
    page.wait(lambda: page.find("#upload-status").get_attribute("data-done") == "true", "the upload to finish", 60)
    assert page.find("#upload-status").text.startswith("owls.md: added")
    page.wait(lambda: "owls.md" in names(), "owls.md in the document list")
    screenshots(page.driver, "documents")
    answer("Barn owls hunt voles and mice by sound [1].")
    page.ask("What do barn owls hunt by sound?")
    done = page.wait_status("complete")
    done.find_element(By.CSS_SELECTOR, ".cite[data-marker='1']").click()
    page.wait(lambda: page.find("#passage-file").text.endswith("owls.md"), "the uploaded file as the source")
    assert "hunt voles and mice by sound alone" in page.find("#passage-text").get_property("textContent")
    owl_item = [li for li in page.find_all("#document-list li") if li.text.startswith("owls.md")][0]
    owl_item.find_element(By.CSS_SELECTOR, ".remove").click()
    page.driver.switch_to.alert.accept()
    page.wait(lambda: "owls.md" not in names(), "owls.md to leave the document list")
    assert "zebras.md" in names()


def test_phone_width_has_no_sideways_scroll(page: ChatPage, answer: Callable[..., None],
                                            screenshots: Callable[..., Any]) -> None:
    page.driver.set_window_size(390, 844)
    answer("Milvus stores embedding vectors and answers nearest-neighbour searches [1].")
    page.ask("What does Milvus store?")
    page.wait_status("complete")
    assert page.driver.execute_script(
        "return document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    screenshots(page.driver, "phone")


def test_a_cited_chunk_is_marked_inside_the_passage_the_answer_read(page: ChatPage, answer: Callable[..., None]) -> None:
    """The lighthouse log is several chunks: the answer reads the matched one with its neighbours, and the page shows
    the whole passage with the matched chunk marked."""
    answer("The keepers wound the fog bell [1].")
    page.ask("What did the lighthouse keepers log?")
    page.wait_status("complete").find_element(By.CSS_SELECTOR, ".cite[data-marker='1']").click()
    page.wait(lambda: page.find("#passage-file").text.endswith("lighthouses.md"), "the lighthouse passage")
    box = page.find("#passage-text")
    marked = box.find_element(By.CSS_SELECTOR, "mark.matched").get_property("textContent")
    whole = box.get_property("textContent")
    assert "Lighthouse keeper log entry" in marked and marked in whole and len(whole) > len(marked)
