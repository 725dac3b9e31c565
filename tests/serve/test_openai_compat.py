"""The official ``openai`` client against a real ``convrag serve`` process without keys (it sends its own key:
an open loopback server takes any), streaming and not; usage, model names, sources numbered from 1."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.serve.conftest import Server
from tests.serve.server_app import ANSWER


def test_completion_and_stream(server: Server) -> None:
    c = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-anything", max_retries=0)
    assert [m.id for m in c.models.list().data] == ["convrag"]
    assert c.models.retrieve("convrag").id == "convrag"
    out = c.chat.completions.create(model="convrag", messages=[
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "What is BM25?"}])
    assert out.choices[0].message.content.strip() == ANSWER.strip() and out.choices[0].finish_reason == "stop"
    assert out.usage.completion_tokens > 20 and out.usage.prompt_tokens > out.usage.completion_tokens // 10
    assert out.usage.total_tokens == out.usage.prompt_tokens + out.usage.completion_tokens
    ext = out.model_extra["convrag"]
    assert out.id == f"chatcmpl-{ext['assistant_message_id']}"
    assert ext["references"][0]["document"] == "bm25.md" and ext["citations"]
    assert ext["citations"][0]["source_index"] == ext["citations"][0]["marker"] == 1  # one numbering
    cid = ext["conversation_id"]
    stream = c.chat.completions.create(model="convrag", stream=True, extra_body={"conversation_id": cid},
                                       stream_options={"include_usage": True},
                                       messages=[{"role": "user", "content": "And Milvus Lite?"}])
    chunks = list(stream)
    first, usage = chunks[0].model_extra["convrag"], chunks[-1].usage
    assert first["conversation_id"] == cid and chunks[0].choices[0].delta.role == "assistant"
    last = chunks[-2]
    assert last.choices[0].finish_reason == "stop" and last.model_extra["convrag"]["citations"]
    assert chunks[-1].choices == [] and usage is not None and usage.completion_tokens > 20
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text.strip() == ANSWER.strip()
    with httpx.Client(base_url=server.url) as h:
        conv = h.get(f"/v1/conversations/{cid}").json()
    assert [m["role"] for m in conv["messages"]] == ["user", "assistant", "user", "assistant"]
    assert conv["messages"][2]["content"] == "And Milvus Lite?" and conv["title"] == "What is BM25?"
    with pytest.raises(openai.NotFoundError) as info:
        c.chat.completions.create(model="convrag", extra_body={"conversation_id": "nope"},
                                  messages=[{"role": "user", "content": "hi"}])
    assert info.value.body["code"] == "not_found"
    with pytest.raises(openai.BadRequestError) as info:
        c.chat.completions.create(model="convrag", messages=[{"role": "assistant", "content": "hi"}])
    assert info.value.body["code"] == "no_question"


def test_an_unknown_model_is_openais_model_not_found(server: Server) -> None:
    c = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-anything", max_retries=0)
    with pytest.raises(openai.NotFoundError) as info:
        c.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert info.value.body["code"] == "model_not_found" and info.value.body["type"] == "invalid_request_error"
    assert "gpt-4o" in info.value.body["message"] and "convrag" in info.value.body["message"]
    with pytest.raises(openai.NotFoundError):
        c.models.retrieve("gpt-4o")
