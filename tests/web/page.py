"""The chat page as the tests drive it: find, type, click, and wait for what a person would see."""

from __future__ import annotations

from typing import Any, Callable, List, TypeVar

from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

T = TypeVar("T")
WAIT_S = 20.0
#: The page re-renders a conversation after each turn: an element found a moment ago may be gone.
RERENDERED = (NoSuchElementException, StaleElementReferenceException)


class ChatPage:
    def __init__(self, driver: Any, url: str) -> None:
        self.driver = driver
        self.url = url

    # waiting -------------------------------------------------------------------------------------------------
    def wait(self, condition: Callable[[], T], what: str, timeout: float = WAIT_S) -> T:
        """Poll ``condition`` until it is truthy; the timeout message says what never appeared."""
        return WebDriverWait(self.driver, timeout, poll_frequency=0.05, ignored_exceptions=RERENDERED).until(
            lambda _: condition(), message=f"waited {timeout:.0f} s for {what}")

    def load(self, path: str = "/") -> None:
        self.driver.get(self.url + path)
        self.wait_ready()

    def reload(self) -> None:
        self.driver.refresh()
        self.wait_ready()

    def wait_ready(self) -> None:
        self.wait(lambda: self.driver.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true",
                  "the page to load")

    # finding -------------------------------------------------------------------------------------------------
    def find(self, css: str) -> WebElement:
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def find_all(self, css: str) -> List[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def answers(self) -> List[WebElement]:
        return self.find_all("#messages .msg.assistant")

    def last_answer(self) -> WebElement:
        return self.answers()[-1]

    def contents(self) -> List[str]:
        """The text of every shown message, oldest first."""
        return [e.get_property("textContent") for e in self.find_all("#messages .msg .content")]

    # acting --------------------------------------------------------------------------------------------------
    def new_conversation(self) -> None:
        self.find("#new-conversation").click()
        self.wait(lambda: not self.find_all("#messages .msg"), "an empty conversation")

    def ask(self, question: str) -> None:
        """Type the question and press Enter (the keyboard path)."""
        before = len(self.answers())
        box = self.find("#question")
        self.wait(box.is_enabled, "the question box to be enabled")
        box.send_keys(question)
        box.send_keys("\n")
        self.wait(lambda: len(self.answers()) == before + 1, "the answer placeholder")

    def wait_status(self, status: str, timeout: float = WAIT_S) -> WebElement:
        """The newest answer once its status is ``status`` (and the page is no longer streaming)."""
        return self.wait(lambda: self._settled(status), f"the newest answer to be {status!r}", timeout)

    def _settled(self, status: str) -> Any:
        # Stop shows while a turn streams and hides after the stored conversation is shown again: look at it
        # first, so that the answer found next is the one rendered last (never one about to be replaced).
        if self.find("#stop").get_attribute("hidden") is None:
            return False
        answers = self.answers()
        if not answers or answers[-1].get_attribute("data-status") != status:
            return False
        return answers[-1]

    def text_of(self, answer: WebElement) -> str:
        return answer.find_element(By.CSS_SELECTOR, ".content").get_property("textContent")
