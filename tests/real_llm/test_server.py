"""The tier's server: serves the verified GGUF under its alias on loopback, and stops cleanly."""

import http.client
import json

import pytest

from llama_index_convrag.config import OpenAICompatible

from llama_index_convrag.testing.real_llm import GGUF_SHA256, MODEL_ALIAS, sha256_of, start_server

pytestmark = pytest.mark.real_llm


def test_served_model_is_the_verified_gguf(real_llm_server, real_llm_setup) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", real_llm_server.port, timeout=10)
    conn.request("GET", "/v1/models")
    models = json.loads(conn.getresponse().read())
    assert [m["id"] for m in models["data"]] == [MODEL_ALIAS]
    assert sha256_of(real_llm_setup.gguf) == GGUF_SHA256


def test_a_second_server_starts_on_another_port_and_stops(real_llm_server, real_llm_setup, tmp_path) -> None:
    server = start_server(real_llm_setup, n_ctx=512, log_path=tmp_path / "second.log")
    try:
        assert server.running and server.port != real_llm_server.port
        reply = OpenAICompatible(**server.client_kwargs(max_tokens=8)).complete("Say OK.")
        assert reply.text.strip()
    finally:
        server.stop()
    assert not server.running
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=2)
    with pytest.raises(OSError):
        conn.request("GET", "/v1/models")
