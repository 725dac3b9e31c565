"""Browser tests of the chat page: a real ``convrag serve`` process and a real headless Chromium.

One server and one browser per module. The server answers with an OpenAI-compatible LLM that is
:class:`LocalOpenAIServer` in this process (``OPENAI_BASE_URL``): each test sets its reply and how slowly it streams.
Chromium and its driver come from Debian (``apt-get install chromium chromium-driver``); without them these tests
skip, except when ``CI=true``, where a missing browser fails them.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

from llama_index_convrag.testing import LocalOpenAIServer

REPO = Path(__file__).resolve().parents[2]
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
DRIVER_CANDIDATES = ("/usr/bin/chromedriver",)
INSTALL_HINT = "apt-get install chromium chromium-driver (Debian) and pip install 'llama-index-convrag[web-test]'"
CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1280,860", "--lang=en-US")
SERVER_START_S = 120.0
PAGE_LOAD_S = 20.0
#: Folder that the tests also write their screenshots to (bench/screenshots.py sets it to docs/img).
ENV_SCREENSHOTS = "CONVRAG_SCREENSHOTS"

DOCS: Dict[str, str] = {
    "zebras.md": "# Zebras\n\nZebras sleep standing up in short naps. A zebra herd keeps watch for lions at night.\n",
    "milvus.md": "# Milvus\n\nMilvus stores embedding vectors and answers nearest-neighbour searches. "
                 "Milvus Lite keeps a whole database in one local file.\n",
    "茶.md": "# 茶\n\n绿茶不发酵，红茶全发酵。乌龙茶是半发酵的茶。\n",
    "lighthouses.md": "# Lighthouses\n\n" + " ".join(
        f"Lighthouse keeper log entry {i}: the lamp was trimmed, the lens polished and the fog bell wound."
        for i in range(24)) + "\n",
}


def _missing(reason: str) -> None:
    """Skip, or fail under CI (the browser tests must run there)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason}: {INSTALL_HINT}")
    pytest.skip(f"{reason}: {INSTALL_HINT}", allow_module_level=True)


def require_selenium() -> None:
    """At the top of a browser test module, before it imports selenium."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        _missing("selenium is not installed")


def _first(paths: tuple) -> Optional[str]:
    found = [p for p in paths if Path(p).exists()]
    return found[0] if found else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Responder:
    """The LLM's replies: the streamed answer is ``answer``; a non-streamed call (a rewrite) echoes the question."""

    def __init__(self) -> None:
        self.answer = "No answer was scripted."

    def __call__(self, body: Dict[str, Any]) -> Dict[str, Any]:
        if body.get("stream"):
            return {"content": self.answer}
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        content = users[-1]["content"] if users else ""
        return {"content": content if isinstance(content, str) else ""}


@pytest.fixture(scope="module")
def llm() -> Iterator[LocalOpenAIServer]:
    server = LocalOpenAIServer(chat_responder=Responder()).start()
    yield server
    server.stop()


@pytest.fixture
def answer(llm: LocalOpenAIServer) -> Iterator[Callable[..., None]]:
    """``answer(text, seconds_per_word=0.0)``: what the LLM streams next, and how slowly."""

    def set_answer(text: str, seconds_per_word: float = 0.0) -> None:
        llm.chat_responder.answer = text
        llm.slow_stream(seconds_per_word)

    yield set_answer
    llm.slow_stream(0.0)


@pytest.fixture(scope="module")
def docs_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("docs")
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@dataclass(frozen=True)
class Served:
    url: str
    #: the server's folder: ``chats.db`` (the conversation store, where keys live), ``milvus.db``, ``serve.log``
    workdir: Path


@pytest.fixture(scope="module")
def serve_url(served: Served) -> str:
    return served.url


@pytest.fixture(scope="module")
def served(llm: LocalOpenAIServer, docs_folder: Path, tmp_path_factory: pytest.TempPathFactory,
           request: pytest.FixtureRequest) -> Iterator[Served]:
    """A real server process over ``docs_folder`` (real local embeddings, Milvus Lite file in tmp), one per module;
    a module's ``SERVE_ARGS`` (a tuple) adds options to its ``convrag serve`` command line."""
    work = tmp_path_factory.mktemp("serve")
    port = free_port()
    env = dict(os.environ, OPENAI_BASE_URL=llm.base_url, OPENAI_API_KEY="test-key", CONVRAG_LLM_MODEL="scripted",
               PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
    env.pop("CONVRAG_MILVUS_URI", None)
    log = (work / "serve.log").open("wb")
    cmd = [sys.executable, "-m", "llama_index_convrag.cli", "serve", str(docs_folder), "--host", "127.0.0.1",
           "--port", str(port), "--uri", str(work / "milvus.db"), "--store", str(work / "chats.db"),
           "--upload-dir", str(work / "uploads"), "-q", *getattr(request.module, "SERVE_ARGS", ())]
    proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(proc, url, work / "serve.log")
        yield Served(url=url, workdir=work)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _wait_healthy(proc: subprocess.Popen, url: str, log: Path) -> None:
    import httpx

    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"convrag serve exited with {proc.returncode}:\n{log.read_text(errors='replace')}")
        try:
            if httpx.get(f"{url}/v1/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"convrag serve did not answer within {SERVER_START_S:.0f} s:\n"
                       f"{log.read_text(errors='replace')}")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium (Debian's, through its chromedriver) for the module."""
    require_selenium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = _first(CHROMIUM_CANDIDATES), _first(DRIVER_CANDIDATES)
    if chromium is None or driver_path is None:
        _missing("chromium or chromedriver is not installed")
    profile = tempfile.mkdtemp(prefix="convrag-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(PAGE_LOAD_S)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Any, str], List[Path]]:
    """``shot(driver, name)`` writes ``serve_NAME.png`` under tmp (and under $CONVRAG_SCREENSHOTS when set)."""
    folders = [tmp_path_factory.mktemp("screenshots")]
    extra = os.environ.get(ENV_SCREENSHOTS)
    if extra:
        Path(extra).mkdir(parents=True, exist_ok=True)
        folders.append(Path(extra))

    def shot(driver: Any, name: str) -> List[Path]:
        paths = [folder / f"serve_{name}.png" for folder in folders]
        for path in paths:
            assert driver.save_screenshot(str(path)), f"could not write {path}"
        return paths

    return shot
