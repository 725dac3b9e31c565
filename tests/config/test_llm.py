"""config.llm: which LLM. The one rule (``configured_llm``: given, else assigned to ``Settings.llm``, else None) and
the environment (``resolve_llm``)."""

import importlib

import pytest
from llama_index.core.settings import Settings
from llama_index.llms.openai import OpenAI

from llama_index_convrag.config.llm import OpenAICompatible, WatchedOpenAI, configured_llm, resolve_llm
from tests.fakes import ScriptedLLM


def test_no_key_no_url_means_no_llm():
    assert resolve_llm(env={}) is None


def test_explicit_llm_wins_over_environment():
    llm = ScriptedLLM.echo()
    assert resolve_llm(llm, env={"OPENAI_API_KEY": "sk-x"}) is llm


def test_api_key_in_env_builds_openai():
    llm = resolve_llm(env={"OPENAI_API_KEY": "sk-x", "CONVRAG_LLM_MODEL": "gpt-4o"})
    assert type(llm) is WatchedOpenAI and isinstance(llm, OpenAI)
    assert llm.model == "gpt-4o"
    assert (llm.max_tokens, llm.timeout, llm.max_retries) == (512, 300.0, 1)  # max_tokens always sent
    assert llm.metadata.context_window == OpenAI(model="gpt-4o", api_key="sk-x").metadata.context_window


def test_base_url_builds_compatible_client_for_any_model_name():
    llm = resolve_llm(env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "CONVRAG_LLM_MODEL": "qwen2.5:7b"},
                      context_window=32768)
    assert isinstance(llm, OpenAICompatible)
    assert llm.api_base == "http://127.0.0.1:9/v1"
    assert llm.metadata.context_window == 32768
    assert llm.metadata.model_name == "qwen2.5:7b"


def test_argument_beats_environment():
    llm = resolve_llm(base_url="http://127.0.0.1:1/v1", env={"OPENAI_BASE_URL": "http://127.0.0.1:2/v1"})
    assert llm.api_base == "http://127.0.0.1:1/v1"


def test_configured_llm_is_the_given_one_else_the_assigned_one_else_none(monkeypatch: pytest.MonkeyPatch):
    given, assigned = ScriptedLLM.echo(), ScriptedLLM.echo()
    monkeypatch.setattr(Settings, "_llm", None)
    assert configured_llm(None) is None  # core's default-building getter is not called
    assert configured_llm(given) is given
    monkeypatch.setattr(Settings, "_llm", assigned)
    assert (configured_llm(None), configured_llm(given)) == (assigned, given)


def test_every_component_decides_with_the_same_rule():
    """The synthesizers, the chat engine and the index all use config.llm's rule (no second copy)."""
    for module in ("synthesizers.resolve", "chat.engine", "chat.factory", "indices.convrag_index"):
        assert importlib.import_module(f"llama_index_convrag.{module}").configured_llm is configured_llm


def test_milvus_names_are_not_resolved_from_config():
    import llama_index_convrag.config as config

    for name in ("MilvusTarget", "resolve_milvus", "default_milvus_uri"):
        assert not hasattr(config, name)
