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
