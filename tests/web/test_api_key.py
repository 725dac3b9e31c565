"""A server with API keys: the page asks for a key once, keeps it in the browser, and forgets it on request.

Its own module (its own server): once a key exists, the whole server wants keys.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from tests.web.conftest import require_selenium

require_selenium()

from llama_index_convrag.storage.conversation import SQLiteConversationStore  # noqa: E402
from tests.web.conftest import Served  # noqa: E402
from tests.web.page import ChatPage  # noqa: E402

KEY_STORAGE = "convrag.apiKey"


@pytest.fixture(scope="module")
def alice_key(served: Served) -> Iterator[str]:
    store = SQLiteConversationStore(str(served.workdir / "chats.db"))
    try:
        _, secret = store.create_key("alice")
    finally:
        store.close()
    yield secret


def dialog_open(page: ChatPage) -> bool:
    return bool(page.driver.execute_script("return document.getElementById('key-dialog').open"))


def test_the_page_asks_for_a_key_once_and_keeps_it(browser: Any, served: Served, alice_key: str,
                                                   answer: Callable[..., None]) -> None:
    page = ChatPage(browser, served.url)
    browser.get(served.url + "/")
    page.wait(lambda: dialog_open(page), "the API key dialog")
    assert page.find("#key-error").text.startswith("this server needs an API key")
    box = page.find("#key-input")
    box.send_keys("ck_wrong")
    box.send_keys("\n")
    page.wait(lambda: dialog_open(page) and page.find("#key-error").text == "the API key is unknown or revoked",
              "the dialog again, saying the key was refused")
    box = page.find("#key-input")
    box.send_keys(alice_key)
    box.send_keys("\n")
    page.wait_ready()
    assert browser.execute_script(f"return localStorage.getItem('{KEY_STORAGE}')") == alice_key
    answer("Zebras sleep standing up [1].")
    page.ask("How do zebras sleep?")
    page.wait_status("complete")
    page.reload()
    assert not dialog_open(page)
    page.wait(lambda: page.find_all("#conversation-list li"), "alice's conversation")
    assert page.find("#forget-key").is_displayed()
    page.find("#forget-key").click()
    assert browser.execute_script(f"return localStorage.getItem('{KEY_STORAGE}')") is None


@pytest.fixture(scope="module")
def team(served: Served, alice_key: str) -> Iterator[dict]:
    """alice's knowledge base ``team-a`` with one document, bob a reader of it; bob's key."""
    import httpx

    store = SQLiteConversationStore(str(served.workdir / "chats.db"))
    try:
        _, bob_key = store.create_key("bob")
    finally:
        store.close()
    alice = {"Authorization": f"Bearer {alice_key}"}
    with httpx.Client(base_url=served.url, timeout=120) as c:
        kb = c.post("/v1/knowledge-bases", json={"name": "team-a"}, headers=alice).json()
        assert c.put(f"/v1/knowledge-bases/{kb['id']}/documents/owls.md", headers=alice,
                     content="# Owls\n\nBarn owls hunt voles by sound alone.\n".encode()).status_code == 200
        c.put(f"/v1/knowledge-bases/{kb['id']}/members/bob", json={"role": "reader"}, headers=alice)
    yield {"id": kb["id"], "bob_key": bob_key}


def use_key(page: ChatPage, key: str) -> None:
    page.driver.get(page.url + "/")
    page.driver.execute_script(f"localStorage.setItem('{KEY_STORAGE}', arguments[0]);"
                               "localStorage.removeItem('convrag.knowledgeBase')", key)
    page.load()


def picker_options(page: ChatPage) -> list:
    return [o.text for o in page.find_all("#kb-picker option")]


def test_the_picker_chooses_the_knowledge_base_a_new_conversation_answers_from(
        browser: Any, served: Served, alice_key: str, team: dict, answer: Callable[..., None]) -> None:
    from selenium.webdriver.support.ui import Select

    page = ChatPage(browser, served.url)
    use_key(page, alice_key)
    assert set(picker_options(page)) == {"team-a", "convrag"}  # and the corpus convrag serve ingested
    Select(page.find("#kb-picker")).select_by_visible_text("team-a")
    page.wait(lambda: page.find("#kb-role").text == "owner", "alice's role in team-a")
    page.new_conversation()
    answer("Barn owls hunt by sound [1].")
    page.ask("How do barn owls hunt?")
    done = page.wait_status("complete")
    assert page.find("#conversation-kb").text == "answers from team-a"
    done.find_element("css selector", ".cite[data-marker='1']").click()
    page.wait(lambda: page.find("#passage-file").text == "owls.md", "the team's document as the source")
    page.find("#toggle-docs").click()
    page.wait(lambda: [e.text for e in page.find_all("#document-list .doc-name")] == ["owls.md"], "team-a's files")
    assert page.find("#upload-label").is_displayed() and page.find_all("#document-list .remove")


def test_a_reader_sees_the_documents_but_no_upload_or_remove(browser: Any, served: Served, team: dict) -> None:
    from selenium.webdriver.support.ui import Select

    page = ChatPage(browser, served.url)
    use_key(page, team["bob_key"])
    Select(page.find("#kb-picker")).select_by_visible_text("team-a")
    page.wait(lambda: page.find("#kb-role").text == "reader", "bob's role in team-a")
    if page.find("#docs").get_attribute("hidden") is not None:
        page.find("#toggle-docs").click()
    page.wait(lambda: [e.text for e in page.find_all("#document-list .doc-name")] == ["owls.md"], "team-a's files")
    assert not page.find("#upload-label").is_displayed() and not page.find_all("#document-list .remove")
    assert "you can read it (reader)" in page.find("#docs-role").text
