"""Fixtures the ported core tests use, ported from LlamaIndex core's ``tests/conftest.py`` (``patch_llm_predictor``)
and ``tests/mock_utils/mock_predict.py`` (only the branches these prompts reach; see README.md, MIT license)."""

from typing import Any

import pytest
from llama_index.core.base.llms.types import LLMMetadata
from llama_index.core.llms.mock import MockLLM
from llama_index.core.prompts.base import BasePromptTemplate
from llama_index.core.prompts.prompt_type import PromptType


def mock_llmpredictor_predict(prompt: BasePromptTemplate, **prompt_args: Any) -> str:
    """Core's mock predict: a question-answer prompt answers ``query_str:context_str``, a refine prompt
    ``existing_answer:context_msg``; any other prompt returns its arguments as ``str(dict)``."""
    full_prompt_args = {**prompt.kwargs, **prompt_args}
    prompt_type = prompt.metadata["prompt_type"]
    if prompt_type == PromptType.QUESTION_ANSWER:
        return full_prompt_args["query_str"] + ":" + full_prompt_args["context_str"]
    if prompt_type == PromptType.REFINE:
        return full_prompt_args["existing_answer"] + ":" + full_prompt_args["context_msg"]
    return str(full_prompt_args)


def patch_llmpredictor_predict(self: Any, prompt: BasePromptTemplate, **prompt_args: Any) -> str:
    return mock_llmpredictor_predict(prompt, **prompt_args)


async def patch_llmpredictor_apredict(self: Any, prompt: BasePromptTemplate, **prompt_args: Any) -> str:
    return patch_llmpredictor_predict(self, prompt, **prompt_args)


@pytest.fixture()
def patch_llm_predictor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MockLLM, "predict", patch_llmpredictor_predict)
    monkeypatch.setattr(MockLLM, "apredict", patch_llmpredictor_apredict)
    monkeypatch.setattr(MockLLM, "metadata", LLMMetadata())
