"""The real-LLM tier's fixtures: one llama.cpp server for the session, and a greedy OpenAI-compatible client.

Tests here carry the ``real_llm`` marker and run only when selected (``pytest -m real_llm``) so the default test
command stays fast; they skip, naming the setup command, when the tier is not set up on this machine.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from llama_index_convrag.config import OpenAICompatible
from llama_index_convrag.config.llamacpp_server import LlamaServer
from llama_index_convrag.testing.real_llm import RealLLMSetup, RealLLMUnavailable, locate, start_server



def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    if "real_llm" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="real-LLM tests run with `pytest -m real_llm` (setup: "
                                   "python -m llama_index_convrag.testing.real_llm setup)")
    for item in items:
        if item.get_closest_marker("real_llm") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def real_llm_setup() -> RealLLMSetup:
    try:
        return locate()
    except RealLLMUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def real_llm_server(real_llm_setup: RealLLMSetup) -> Iterator[LlamaServer]:
    server = start_server(real_llm_setup)
    yield server
    server.stop()


@pytest.fixture
def real_llm(real_llm_server: LlamaServer) -> Any:
    """A greedy (temperature 0) client of the session's server."""
    return OpenAICompatible(**real_llm_server.client_kwargs(max_tokens=256))
