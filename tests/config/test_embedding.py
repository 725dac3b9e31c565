"""config.embedding: which embedding model (explicit, then spec / environment, else the local model)."""

import pytest
from llama_index.embeddings.openai import OpenAIEmbedding

from llama_index_convrag.config.embedding import resolve_embed_model
from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding


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


def test_embed_local_spec_names_the_variant():
    assert resolve_embed_model(spec="local:int8", env={}).variant == "int8"
    assert resolve_embed_model(env={"CONVRAG_EMBED_MODEL": "local:fp32"}).variant == "fp32"
    with pytest.raises(ValueError, match=r"variant must be one of \['fp32', 'int8'\], got 'int4'"):
        resolve_embed_model(spec="local:int4", env={})
