import pytest
from llama_index.embeddings.openai import OpenAIEmbedding
from llama_index.llms.openai import OpenAI

from llama_index_convrag.config import (
    OpenAICompatible,
    resolve_embed_model,
    resolve_llm,
)
from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding
from tests.fakes import ScriptedLLM


def test_no_key_no_url_means_no_llm():
    assert resolve_llm(env={}) is None


def test_explicit_llm_wins_over_environment():
    llm = ScriptedLLM.echo()
    assert resolve_llm(llm, env={"OPENAI_API_KEY": "sk-x"}) is llm


def test_api_key_in_env_builds_openai():
    llm = resolve_llm(env={"OPENAI_API_KEY": "sk-x", "CONVRAG_LLM_MODEL": "gpt-4o"})
    assert type(llm) is OpenAI
    assert llm.model == "gpt-4o"


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


def test_embed_default_is_local_even_with_a_key():
    assert isinstance(resolve_embed_model(env={"OPENAI_API_KEY": "sk-x"}), LocalMiniLMEmbedding)


def test_embed_openai_spec():
    model = resolve_embed_model(spec="openai:text-embedding-3-large", env={"OPENAI_API_KEY": "sk-x"})
    assert isinstance(model, OpenAIEmbedding)
    assert model.model_name == "text-embedding-3-large"


def test_embed_openai_without_credentials_is_an_error():
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        resolve_embed_model(spec="openai", env={})


def test_unknown_embed_provider_names_value_and_choices():
    with pytest.raises(ValueError, match=r"one of \['local', 'openai'\], got 'cohere'"):
        resolve_embed_model(spec="cohere:embed", env={})
