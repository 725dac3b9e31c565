"""The OpenAI client path, for real, through LlamaIndex's OpenAI classes and the local HTTP server."""

import json

import numpy as np
import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import BaseModel
from llama_index.core.prompts import PromptTemplate
from llama_index.embeddings.openai import OpenAIEmbedding

from llama_index_convrag.config import resolve_llm


class Verdict(BaseModel):
    answer: str
    confident: bool


def _llm(server, **kw):
    return resolve_llm(base_url=server.base_url, model="local-model", env={}, **kw)


def test_chat_completion_roundtrip(openai_server):
    openai_server.chat_responder = lambda body: {"content": f"seen {len(body['messages'])} messages"}
    reply = _llm(openai_server).chat([ChatMessage(role="system", content="s"), ChatMessage(role="user", content="hi")])
    assert reply.message.content == "seen 2 messages"
    assert openai_server.paths() == ["/v1/chat/completions"]
    assert openai_server.requests[0].body["model"] == "local-model"


def test_streaming_over_sse(openai_server):
    openai_server.chat_responder = lambda body: {"content": "one two three"}
    deltas = [r.delta for r in _llm(openai_server).stream_chat([ChatMessage(role="user", content="x")])]
    assert "".join(d for d in deltas if d) == "one two three"
    assert len([d for d in deltas if d]) == 3
    assert openai_server.requests[0].body["stream"] is True


async def test_async_streaming_over_sse(openai_server):
    openai_server.chat_responder = lambda body: {"content": "alpha beta"}
    gen = await _llm(openai_server).astream_complete("q")
    text = ""
    async for r in gen:
        text = r.text
    assert text == "alpha beta"


def test_tool_call_structured_output(openai_server):
    def responder(body):
        assert body["tools"][0]["function"]["name"] == "Verdict"
        return {"tool_calls": [{"name": "Verdict", "arguments": json.dumps({"answer": "42", "confident": True})}]}

    openai_server.chat_responder = responder
    out = _llm(openai_server).structured_predict(Verdict, PromptTemplate("Q: {q}"), q="life")
    assert out == Verdict(answer="42", confident=True)


def test_embeddings_endpoint_uses_the_real_local_model(openai_server, embed_model):
    client = OpenAIEmbedding(model_name="local-embed", api_base=openai_server.base_url, api_key="x",
                             dimensions=None)
    vectors = client.get_text_embedding_batch(["hello world", "vector search"])
    np.testing.assert_allclose(vectors, embed_model.embed(["hello world", "vector search"]), atol=1e-5)


def test_injected_failure_is_retried_by_the_client(openai_server):
    openai_server.fail_next(503, times=1)
    llm = _llm(openai_server, )
    llm.max_retries = 2
    assert llm.complete("retry me").text == "echo: retry me"
    assert openai_server.paths() == ["/v1/chat/completions", "/v1/chat/completions"]


def test_rerank_endpoint_orders_by_relevance(openai_server):
    import httpx

    r = httpx.post(f"{openai_server.base_url}/rerank", json={
        "model": "m", "query": "photosynthesis in plants", "top_n": 2,
        "documents": ["football scores", "plants turn light into sugar", "tax law"]})
    results = r.json()["results"]
    assert [x["index"] for x in results][0] == 1
    assert len(results) == 2


def test_server_refuses_non_loopback_host():
    from llama_index_convrag.testing import LocalOpenAIServer

    with pytest.raises(ValueError, match="loopback"):
        LocalOpenAIServer(host="0.0.0.0")


def test_a_client_that_goes_away_mid_stream_leaves_no_traceback(capfd):
    """Issue 14: a client closing a stream (its timeout, a killed chat) made the server thread print a
    BrokenPipeError traceback into the test log. Now the request ends quietly; other handler errors are recorded."""
    import socket
    import struct
    import time

    from llama_index_convrag.testing import LocalOpenAIServer

    with LocalOpenAIServer(chat_responder=lambda body: {"content": " ".join(["word"] * 400)}) as server:
        server.slow_stream(0.005)
        body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}).encode()
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: local\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(body) + body)
            assert sock.recv(64).startswith(b"HTTP/1.1 200")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST: writes fail
        deadline = time.monotonic() + 60
        while server.handled == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.handled == 1 and server.handler_errors == []
    err = capfd.readouterr().err
    assert "Traceback" not in err and "BrokenPipeError" not in err and "ConnectionResetError" not in err


def test_a_failure_goes_to_the_next_request_to_arrive_not_to_one_still_asleep(openai_server):
    """A request delayed from before ``fail_next`` (an earlier test's, its client gone) does not take the failure."""
    import threading
    import time
    import urllib.request

    def post() -> int:
        request = urllib.request.Request(f"{openai_server.base_url}/chat/completions", method="POST",
                                         data=json.dumps({"model": "m", "messages": [{"role": "user",
                                                                                      "content": "x"}]}).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                return reply.status
        except urllib.error.HTTPError as exc:
            return exc.code

    openai_server.delay_s = 0.3
    statuses = {}
    asleep = threading.Thread(target=lambda: statuses.update(asleep=post()))
    asleep.start()
    while not openai_server.requests:  # it arrived and sleeps
        time.sleep(0.01)
    openai_server.delay_s = 0.0
    openai_server.fail_next(400)
    asleep.join()  # it woke after the failure was set
    statuses["next"] = post()
    assert statuses == {"asleep": 200, "next": 400}
