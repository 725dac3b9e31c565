"""Expected outcomes of core's tests that do not pass here, each with its reason (the test files stay as ported).

Every entry is a strict xfail: when one starts passing, the suite fails until the entry is removed.
``DIVERGENCES`` are deliberate and listed in docs/COMPATIBILITY.md; ``CORE_FAILS`` fail on LlamaIndex core 0.14.25
itself (the ported files are newer than that release), so they are not divergences; ``PENDING`` are not done yet.
"""

from __future__ import annotations

from typing import Dict

import importlib.metadata

import pytest

CORE_VERSION = tuple(int(p) for p in importlib.metadata.version("llama-index-core").split(".")[:3])

NO_SETTINGS_LLM = (
    "divergence: no default Settings.llm - with no llm given and none assigned to Settings.llm, core's getter builds "
    "a default OpenAI client; we raise naming the fix (docs/COMPATIBILITY.md)"
)
ACCUMULATE_STREAMS = (
    "divergence: accumulate modes stream the joined answer where core raises 'Unable to stream' "
    "(docs/COMPATIBILITY.md)"
)

DIVERGENCES: Dict[str, str] = {
    "test_accumulate.py::test_accumulate_streaming_raises_on_get_response": ACCUMULATE_STREAMS,
    "test_accumulate.py::test_accumulate_streaming_raises_on_aget_response": ACCUMULATE_STREAMS,
    **{
        f"test_compact_and_accumulate.py::TestCompactAndAccumulate::test_{s}synthesize__streaming_raises_error[{llm}]": (
            ACCUMULATE_STREAMS
        )
        for s in ("", "a")
        for llm in ("llm0", "llm1")
    },
    "test_factory.py::test_explicit_prompt_helper": NO_SETTINGS_LLM,
    "test_factory.py::test_prompt_helper_from_global_settings": NO_SETTINGS_LLM,
    "test_factory.py::test_default_behavior_when_no_custom_llm_or_prompt_helper_supplied": NO_SETTINGS_LLM,
}

CORE_FAILS: Dict[str, str] = {
    "test_factory_prompt_helper.py::test_prompt_helper_respects_llm_metadata": (
        "fails on core 0.14.25 too: MockLLM(max_tokens=8192) sets num_output, not context_window (3900)"
    ),
    "test_no_text.py::test_no_text_synthesize_returns_empty_response": (
        "fails on core 0.14.25 too: str(Response('')) is 'None' in core's Response"
    ),
    **{  # core's MockFunctionCallingLLM passes its call's keywords to the response generator from 0.14.23 on
        f"test_tree_summarize.py::TestTreeSummarize::test_{sync}synthesize__output_cls_default_function_calling_program"
        f"[{variant}]": (
            "fails on core 0.14.25 too: the test's response_generator takes no tools= keyword, which 0.14.25's "
            "MockFunctionCallingLLM passes"
        )
        for sync in ("", "a")
        for variant in ("text_chat", "multimodal")
        if CORE_VERSION >= (0, 14, 23)
    },
}

PENDING: Dict[str, str] = {}

EXPECTED = {**DIVERGENCES, **CORE_FAILS, **PENDING}


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    for item in items:
        key = item.nodeid.split("response_synthesizers/", 1)[-1]
        if key in EXPECTED:
            item.add_marker(pytest.mark.xfail(strict=True, reason=EXPECTED[key]))
