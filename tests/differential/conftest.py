"""Each differential test starts from LlamaIndex's ``Settings`` with nothing assigned and leaves them as it found
them: core's getters cache what they build (core 0.14.22 a default chat prompt helper), which would otherwise count as
assigned in a later test."""

from typing import Iterator

import pytest
from llama_index.core.settings import Settings

from tests.differential.harness import SETTINGS_FIELDS, settings_llm


@pytest.fixture(autouse=True)
def isolated_settings() -> Iterator[None]:
    with settings_llm(None):
        for name in SETTINGS_FIELDS:
            setattr(Settings, name, None)
        yield
