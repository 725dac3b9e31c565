"""The official ``openai`` client against a real ``convrag serve`` process, streaming and not."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.serve.conftest import Server
from tests.serve.server_app import ANSWER


def test_completion_and_stream(server: Server) -> None:
    import httpx

    c = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0,
                      http_client=httpx.Client(headers={}, event_hooks={"request": [_strip_auth]}))
    assert [m.id for m in c.models.list().data] == ["convrag"]
    out = c.chat.completions.create(model="convrag", messages=[
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "What is BM25?"}])
    assert out.choices[0].message.content.strip() == ANSWER.strip() and out.choices[0].finish_reason == "stop"
    ext = out.model_extra["convrag"]
    assert out.id == f"chatcmpl-{ext['assistant_message_id']}"
    assert ext["references"][0]["ref_doc_id"].endswith("bm25.md") and ext["citations"]
    cid = ext["conversation_id"]
    stream = c.chat.completions.create(model="convrag", stream=True, extra_body={"conversation_id": cid},
                                       messages=[{"role": "user", "content": "And Milvus Lite?"}])
    chunks = list(stream)
    first, last = chunks[0].model_extra["convrag"], chunks[-1]
    assert first["conversation_id"] == cid and chunks[0].choices[0].delta.role == "assistant"
    assert last.choices[0].finish_reason == "stop" and last.model_extra["convrag"]["citations"]
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks)
    assert text.strip() == ANSWER.strip()
    with httpx.Client(base_url=server.url) as h:
        conv = h.get(f"/v1/conversations/{cid}").json()
    assert [m["role"] for m in conv["messages"]] == ["user", "assistant", "user", "assistant"]
    assert conv["messages"][2]["content"] == "And Milvus Lite?"
    with pytest.raises(openai.NotFoundError) as info:
        c.chat.completions.create(model="convrag", extra_body={"conversation_id": "nope"},
                                  messages=[{"role": "user", "content": "hi"}])
    assert info.value.body["code"] == "not_found"
    with pytest.raises(openai.BadRequestError) as info:
        c.chat.completions.create(model="convrag", messages=[{"role": "assistant", "content": "hi"}])
    assert info.value.body["code"] == "no_question"


def _strip_auth(request: "httpx.Request") -> None:  # open mode: no key exists, send none
    request.headers.pop("authorization", None)
