"""Each differential test leaves LlamaIndex's ``Settings`` as it found them (core's getters cache what they build)."""

from typing import Iterator

import pytest

from tests.differential.harness import settings_llm


@pytest.fixture(autouse=True)
def isolated_settings() -> Iterator[None]:
    from llama_index.core.settings import Settings

    with settings_llm(Settings._llm):
        yield
