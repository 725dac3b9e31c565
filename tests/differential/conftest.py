"""Each differential test starts from LlamaIndex's ``Settings`` with nothing assigned and leaves them as it found
them: core's getters cache what they build (core 0.14.22 a default chat prompt helper), which would otherwise count as
assigned in a later test.

Core's ``RichPromptTemplate`` (the multimodal ``chat_content_*`` prompts, used by core's classes and ours alike)
compiles its Jinja source through banks on every ``format_messages``; here each source is compiled once per session
(``compiled_rich_prompts``), which changes no rendered text and takes most of the folder's time off."""

from functools import lru_cache
from typing import Any, Iterator

import pytest
from banks.env import env as banks_env
from llama_index.core.settings import Settings

from tests.differential.harness import SETTINGS_FIELDS, settings_llm


@pytest.fixture(autouse=True)
def isolated_settings() -> Iterator[None]:
    with settings_llm(None):
        for name in SETTINGS_FIELDS:
            setattr(Settings, name, None)
        yield


@pytest.fixture(scope="session", autouse=True)
def compiled_rich_prompts() -> Iterator[None]:
    """banks' ``env.from_string`` remembers the template it compiled for each source (a Jinja ``Template`` is
    reusable: rendering does not change it); calls with other arguments compile as before."""
    compile_source = banks_env.from_string
    cached = lru_cache(maxsize=None)(compile_source)

    def from_string(source: Any, globals: Any = None, template_class: Any = None) -> Any:
        if globals is None and template_class is None and isinstance(source, str):
            return cached(source)
        return compile_source(source, globals, template_class)

    banks_env.from_string = from_string
    yield
    del banks_env.from_string
