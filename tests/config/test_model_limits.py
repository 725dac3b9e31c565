"""config.model_limits: explicit > environment > server-reported > default, the parsers of what servers say, and the
probe against a real HTTP server on 127.0.0.1."""

import math

import pytest

from llama_index_convrag.config.llm import OpenAICompatible, resolve_llm, token_counter
from llama_index_convrag.config.model_limits import (DEFAULT_CONTEXT_WINDOW, ServerLimits, limits_from_models,
                                                     probe_server, probe_tokenizer, resolve_limits, server_root,
                                                     token_count, tokenize_body, window_from_props)
from llama_index_convrag.config.tokens import count_tokens
from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.testing import LocalOpenAIServer

ENV = {"CONVRAG_LLM_CONTEXT_WINDOW": "6000", "CONVRAG_LLM_MAX_TOKENS": "300", "CONVRAG_LLM_TIMEOUT": "45"}
SERVER = ServerLimits(context_window=4096, max_tokens=200, endpoint="GET /props")


def test_defaults_when_nothing_says():
    limits = resolve_limits()
    assert (limits.context_window, limits.max_tokens, limits.timeout) == (DEFAULT_CONTEXT_WINDOW, 512, 300.0)
    assert limits.sources == {"context_window": "default", "max_tokens": "default", "timeout": "default"}


def test_server_beats_default_env_beats_server_option_beats_env():
    assert (resolve_limits(server=SERVER).context_window, resolve_limits(server=SERVER).max_tokens) == (4096, 200)
    from_env = resolve_limits(env=ENV, server=SERVER)
    assert (from_env.context_window, from_env.max_tokens, from_env.timeout) == (6000, 300, 45.0)
    assert from_env.sources["context_window"] == "env CONVRAG_LLM_CONTEXT_WINDOW"
    given = resolve_limits(context_window=3000, max_tokens=100, timeout=5, env=ENV, server=SERVER)
    assert (given.context_window, given.max_tokens, given.timeout) == (3000, 100, 5.0)
    assert set(given.sources.values()) == {"option"}
    assert resolve_limits(server=SERVER).sources["context_window"] == "server GET /props"


def test_default_output_limit_is_capped_at_a_quarter_of_a_small_window():
    assert resolve_limits(context_window=1024).max_tokens == 256


@pytest.mark.parametrize("kw, env, message", [
    ({}, {"CONVRAG_LLM_CONTEXT_WINDOW": "big"}, r"context window \(env CONVRAG_LLM_CONTEXT_WINDOW\) must be an "
                                                 r"integer >= 1, got 'big'"),
    ({"context_window": 100}, {}, r"must be >= 256 tokens, got 100"),
    ({"max_tokens": 0}, {}, r"max tokens \(option\) must be an integer >= 1, got 0"),
    ({"context_window": 1000, "max_tokens": 1000}, {}, r"max tokens 1000 \(option\) must be below the context "
                                                        r"window 1000"),
    ({}, {"CONVRAG_LLM_TIMEOUT": "-1"}, r"LLM timeout \(env CONVRAG_LLM_TIMEOUT\) must be a number of seconds > 0, "
                                        r"got '-1'"),
])
def test_bad_values_name_the_value_and_where_it_came_from(kw, env, message):
    with pytest.raises(ConfigurationError, match=message):
        resolve_limits(env=env, **kw)


def test_what_servers_say_is_read_from_their_own_shapes():
    assert window_from_props({"default_generation_settings": {"n_ctx": 4096}}) == 4096
    assert window_from_props({"n_ctx": 2048}) == 2048
    assert window_from_props({"default_generation_settings": {}}) is None
    vllm = {"data": [{"id": "m", "max_model_len": 32768}]}
    assert limits_from_models(vllm, "m") == (32768, None)
    two = {"data": [{"id": "a", "context_length": 1000}, {"id": "b", "context_length": 2000,
                                                          "max_output_tokens": 100}]}
    assert limits_from_models(two, "b") == (2000, 100)
    assert limits_from_models(two, "c") == (None, None)  # two models, none named: nothing is guessed
    trained_only = {"data": [{"id": "m", "meta": {"n_ctx_train": 32768}}]}
    assert limits_from_models(trained_only, "m") == (None, None)
    assert server_root("http://127.0.0.1:8080/v1/") == "http://127.0.0.1:8080"


def test_probe_reads_llamacpp_props_first_then_models():
    with LocalOpenAIServer() as server:
        assert probe_server(server.base_url, "local") == ServerLimits()
        server.model_meta = {"max_model_len": 3000}
        assert probe_server(server.base_url, "local") == ServerLimits(3000, None, "GET /v1/models")
        server.props = {"default_generation_settings": {"n_ctx": 4096}}
        assert probe_server(server.base_url, "local") == ServerLimits(4096, None, "GET /props")
        assert server.probes[-1] == "/props"


def test_probe_of_a_closed_port_says_nothing():
    with LocalOpenAIServer() as server:
        url = server.base_url
    assert probe_server(url, "m", timeout=1.0) == ServerLimits()


def test_resolve_llm_uses_the_server_window_and_always_sets_max_tokens():
    with LocalOpenAIServer() as server:
        server.props = {"default_generation_settings": {"n_ctx": 4096}}
        llm = resolve_llm(base_url=server.base_url, model="local", env={})
        assert isinstance(llm, OpenAICompatible)
        assert (llm.metadata.context_window, llm.max_tokens, llm.timeout) == (4096, 512, 300.0)
        assert llm.limits().sources["context_window"] == "server GET /props"
        given = resolve_llm(base_url=server.base_url, model="local", env={}, context_window=2048, max_tokens=64,
                            timeout=9.0)
        assert (given.metadata.context_window, given.max_tokens, given.timeout) == (2048, 64, 9.0)
        server.probes.clear()
        resolve_llm(base_url=server.base_url, model="local", env=ENV)
        assert not {"/props", "/v1/models"} & set(server.probes)  # window and output limit both set: not asked


def test_tokenize_shapes_of_each_server():
    assert tokenize_body("llama.cpp", "hi", "m") == {"content": "hi", "add_special": False}
    assert tokenize_body("llama-cpp-python", "hi", "m") == {"input": "hi"}
    assert tokenize_body("vllm", "hi", "m") == {"model": "m", "prompt": "hi", "add_special_tokens": False}
    assert (token_count({"tokens": [1, 2, 3]}), token_count({"count": 7}), token_count({"detail": "x"})) == (3, 7, None)


def test_the_served_models_own_count_is_used_when_the_server_has_one():
    text = "For green tea, note 12: steep the leaves at 82 degrees."
    with LocalOpenAIServer() as server:
        plain = resolve_llm(base_url=server.base_url, model="local", env={})
        assert probe_tokenizer(server.base_url) is None and token_counter(plain) is None
        assert plain.count_tokens(text) == count_tokens(text)  # no endpoint: tiktoken
        server.tokenize, server.token_scale = True, 1.3
        assert probe_tokenizer(server.base_url) == (f"http://127.0.0.1:{server.port}/tokenize", "llama.cpp")
        llm = resolve_llm(base_url=server.base_url, model="local", env={})
        assert token_counter(llm) == llm.count_tokens
        assert llm.count_tokens(text) == math.ceil(count_tokens(text) * 1.3)
        server.tokenize = False  # the endpoint goes away: tiktoken again, no error
        assert llm.count_tokens(text) == count_tokens(text)
