"""The conversation API over real HTTP against a real uvicorn process (SQLite store, Milvus Lite, ScriptedLLM)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import httpx
import pytest

from llama_index_convrag.storage.conversation import SQLiteConversationStore
from tests.serve.conftest import CORS_ORIGIN, Server
from tests.serve.server_app import ANSWER


def events(response: httpx.Response, ids: Optional[List[int]] = None) -> List[Tuple[str, Dict[str, Any]]]:
    """The named events of an SSE response (their ``id:`` lines appended to ``ids`` when given)."""
    out, name = [], None
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("id: ") and ids is not None:
            ids.append(int(line[4:]))
        elif line.startswith("data: "):
            out.append((name, json.loads(line[6:])))
    return out


def assert_error(response: httpx.Response, status: int, code: str) -> Dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"type", "code", "message", "param"}
    assert body["error"]["code"] == code
    return body["error"]


def new_conversation(c: httpx.Client, title: str = "t") -> str:
    r = c.post("/v1/conversations", json={"title": title})
    assert r.status_code == 201
    return r.json()["id"]


@pytest.fixture
def client(server: Server) -> httpx.Client:
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


def test_stream_events_in_order_ids_first_and_stored(client: httpx.Client) -> None:
    cid = client.post("/v1/conversations", json={}).json()["id"]  # no title: the first question gives it
    ids: List[int] = []
    with client.stream("POST", f"/v1/conversations/{cid}/messages", json={"content": "What is BM25?"}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        evs = events(r, ids)
    # every event has an id, increasing from 1 (deltas a slow reader has not read yet go out as one, the last's id)
    assert len(ids) == len(evs) and ids[0] == 1 and all(a < b for a, b in zip(ids, ids[1:]))
    names = [n for n, _ in evs]
    assert names[0] == "start" and names[1] == "retrieval" and names[-1] == "done"
    assert set(names[2:-1]) == {"delta"}
    start, retrieval, done = evs[0][1], evs[1][1], evs[-1][1]
    assert start["conversation_id"] == cid and start["version"] == 1
    assert retrieval["retrieval_query"] == "What is BM25?"
    refs = retrieval["references"]
    assert refs[0]["document"] == "bm25.md" and [r["source_index"] for r in refs] == list(range(1, len(refs) + 1))
    assert not any("file_path" in r["metadata"] or r["document"].startswith("/") for r in refs)  # no server path
    text = "".join(d["text"] for n, d in evs if n == "delta")
    assert text == ANSWER.strip() or text == ANSWER
    assert done["assistant_message_id"] == start["assistant_message_id"] and done["status"] == "complete"
    assert [c["node_id"] for c in done["citations"]][:1] == [refs[0]["node_id"]]
    first = done["citations"][0]  # one numbering: the citation of [1] is reference 1
    assert (first["marker"], first["source_index"], first["document"]) == (1, 1, "bm25.md")
    timings = done["timings"]  # the engine streamed at least one token, each after the server's 20 ms delay
    assert set(timings) == {"server_ms", "start_ms", "engine_ms"}
    assert timings["server_ms"] >= timings["start_ms"] + timings["engine_ms"] and timings["engine_ms"] >= 20
    conv = client.get(f"/v1/conversations/{cid}").json()
    assert [(m["id"], m["role"], m["status"]) for m in conv["messages"]] == [
        (start["user_message_id"], "user", "complete"), (start["assistant_message_id"], "assistant", "complete")]
    mid = start["assistant_message_id"]
    assert client.get(f"/v1/messages/{mid}/citations").json()["data"] == done["citations"]
    record = client.get(f"/v1/messages/{mid}/turn").json()
    assert record["assistant_message_id"] == mid and record["retrieval_query"] == "What is BM25?"
    assert record["citations"] == done["citations"] and record["retrieved_ids"]["final"][0] == "bm25.md"
    assert client.get(f"/v1/conversations/{cid}").json()["title"] == "What is BM25?"  # titled from the question


def test_non_streamed_turn(client: httpx.Client) -> None:
    cid = new_conversation(client)
    r = client.post(f"/v1/conversations/{cid}/messages", json={"content": "What is Milvus Lite?", "stream": False})
    body = r.json()
    assert r.status_code == 200 and body["status"] == "complete" and body["conversation_id"] == cid
    assert body["content"] == client.get(f"/v1/messages/{body['assistant_message_id']}").json()["content"]


def test_disconnect_mid_stream_leaves_cancelled_partial_then_regenerate(client: httpx.Client,
                                                                       server: Server) -> None:
    cid = new_conversation(client)
    with client.stream("POST", f"/v1/conversations/{cid}/messages", json={"content": "What is fusion?"}) as r:
        seen, mid = 0, None
        for line in r.iter_lines():
            if line.startswith("data: ") and mid is None:
                mid = json.loads(line[6:])["assistant_message_id"]
            if line.startswith("event: delta"):
                seen += 1
                if seen == 3:
                    break  # leaving the block closes the connection
    deadline = time.monotonic() + 30
    while True:
        m = client.get(f"/v1/messages/{mid}").json()
        if m["status"] != "pending" or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert m["status"] == "cancelled"
    assert 0 < len(m["content"]) < len(ANSWER.strip()) and ANSWER.startswith(m["content"][:20])
    # the cancelled answer can be regenerated as version 2 once the turn released its claim (a 409 until then)
    for _ in range(100):
        with client.stream("POST", f"/v1/messages/{mid}/regenerate", json={}) as r:
            if r.status_code != 409:
                evs = events(r)
                break
        time.sleep(0.05)
    start = evs[0][1]
    assert evs[-1][0] == "done" and start["version"] == 2 and start["reply_to"] == m["reply_to"]
    versions = client.get(f"/v1/messages/{mid}/versions").json()["data"]
    assert [(v["id"], v["status"], v["version"]) for v in versions] == [
        (mid, "cancelled", 1), (start["assistant_message_id"], "complete", 2)]
    assert versions[0]["superseded_by"] == start["assistant_message_id"]
    conv = client.get(f"/v1/conversations/{cid}").json()
    assert [m["role"] for m in conv["messages"]] == ["user", "assistant", "assistant"]


def test_second_turn_in_flight_is_409(client: httpx.Client, server: Server) -> None:
    cid = new_conversation(client)
    first_started = threading.Event()
    result: Dict[str, Any] = {}

    def first() -> None:
        with httpx.Client(base_url=server.url, timeout=60) as c2:
            with c2.stream("POST", f"/v1/conversations/{cid}/messages", json={"content": "What is BM25?"}) as r:
                for line in r.iter_lines():
                    if line.startswith("event: delta"):
                        first_started.set()
                result["status"] = r.status_code

    t = threading.Thread(target=first)
    t.start()
    assert first_started.wait(60)
    assert_error(client.post(f"/v1/conversations/{cid}/messages", json={"content": "again"}), 409, "turn_in_flight")
    t.join()
    assert result["status"] == 200
    r = client.post(f"/v1/conversations/{cid}/messages", json={"content": "now", "stream": False})
    assert r.status_code == 200


def test_feedback_rename_list_delete(client: httpx.Client) -> None:
    cid = new_conversation(client, "first")
    body = client.post(f"/v1/conversations/{cid}/messages", json={"content": "BM25?", "stream": False}).json()
    mid = body["assistant_message_id"]
    fb = client.post(f"/v1/messages/{mid}/feedback", json={"rating": "down", "text": "too long"}).json()
    assert (fb["message_id"], fb["rating"], fb["text"]) == (mid, "down", "too long")
    assert client.get(f"/v1/messages/{mid}").json()["feedback"]["rating"] == "down"
    assert_error(client.post(f"/v1/messages/{body['user_message_id']}/feedback", json={"rating": "up"}),
                 400, "not_an_answer")
    assert client.patch(f"/v1/conversations/{cid}", json={"title": "renamed"}).json()["title"] == "renamed"
    ids = []
    cursor = None
    while True:
        page = client.get("/v1/conversations", params={"limit": 2, **({"cursor": cursor} if cursor else {})}).json()
        ids += [c["id"] for c in page["data"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert cid in ids and len(ids) == len(set(ids))
    assert client.delete(f"/v1/conversations/{cid}").status_code == 204
    assert_error(client.get(f"/v1/conversations/{cid}"), 404, "not_found")
    assert_error(client.get(f"/v1/messages/{mid}"), 404, "not_found")


def test_limits_and_validation_in_one_shape(client: httpx.Client) -> None:
    cid = new_conversation(client)
    err = assert_error(client.post(f"/v1/conversations/{cid}/messages", json={"content": "x" * 501}), 400,
                       "question_too_long")
    assert "max_question_chars" in err["message"] and "501" in err["message"]
    assert "max_page_size" in assert_error(client.get("/v1/conversations", params={"limit": 51}), 400,
                                           "page_size")["message"]
    assert "max_body_bytes" in assert_error(client.post("/v1/conversations", content=b"{" + b" " * 70000 + b"}",
                                                        headers={"content-type": "application/json"}),
                                            413, "body_too_large")["message"]
    assert assert_error(client.post(f"/v1/conversations/{cid}/messages", json={}), 400,
                        "validation_error")["param"] == "content"
    assert_error(client.get("/v1/nowhere"), 404, "not_found")
    assert_error(client.get("/v1/conversations", params={"cursor": "zz"}), 400, "bad_cursor")


def test_keys_two_users_and_401(client: httpx.Client, server: Server) -> None:
    mine = new_conversation(client)  # open mode: user 'local'
    store = SQLiteConversationStore(server.workdir / "chats.db")
    (key_a, alice), (key_b, bob) = store.create_key("alice"), store.create_key("bob")
    try:
        revoked, revoked_secret = store.create_key("carol")
        assert store.revoke_key(revoked.id)
        assert store.user_for_key(alice) == "alice" and alice not in str(store.list_keys())
        _two_users(client, mine, alice, bob, revoked_secret)
    finally:  # the session's server is open again for the other tests
        store.revoke_key(key_a.id)
        store.revoke_key(key_b.id)
        store.close()
    assert client.get("/v1/conversations").status_code == 200


def _two_users(client: httpx.Client, mine: str, alice: str, bob: str, revoked_secret: str) -> None:
    assert_error(client.get("/v1/conversations"), 401, "missing_api_key")
    assert_error(client.get("/v1/conversations", headers={"Authorization": f"Bearer {revoked_secret}"}), 401,
                 "invalid_api_key")
    assert_error(client.get("/v1/conversations", headers={"Authorization": "Bearer nope"}), 401, "invalid_api_key")
    a, b = {"Authorization": f"Bearer {alice}"}, {"Authorization": f"Bearer {bob}"}
    cid = client.post("/v1/conversations", json={}, headers=a).json()["id"]
    body = client.post(f"/v1/conversations/{cid}/messages", json={"content": "BM25?", "stream": False},
                       headers=a).json()
    mid = body["assistant_message_id"]
    assert [c["id"] for c in client.get("/v1/conversations", headers=b).json()["data"]] == []
    for path in (f"/v1/conversations/{cid}", f"/v1/messages/{mid}", f"/v1/messages/{mid}/citations",
                 f"/v1/messages/{mid}/turn", f"/v1/conversations/{mine}"):
        assert_error(client.get(path, headers=b), 404, "not_found")
    assert_error(client.post(f"/v1/conversations/{cid}/messages", json={"content": "hi"}, headers=b), 404,
                 "not_found")
    assert_error(client.post(f"/v1/messages/{mid}/feedback", json={"rating": "up"}, headers=b), 404, "not_found")
    assert client.get(f"/v1/conversations/{cid}", headers=a).status_code == 200
    # the OpenAI endpoint too: another user's conversation id is 404
    assert_error(client.post("/v1/chat/completions", headers=b, json={
        "model": "convrag", "messages": [{"role": "user", "content": "hi"}], "conversation_id": cid}), 404,
        "not_found")


def test_regenerate_an_answer_a_killed_worker_left_pending(client: httpx.Client, server: Server) -> None:
    cid = new_conversation(client)
    store = SQLiteConversationStore(server.workdir / "chats.db")
    try:  # what a worker killed mid-turn leaves: the question and a pending placeholder
        user, stuck = store.begin_turn(cid, "What is BM25?")
    finally:
        store.close()
    assert client.get(f"/v1/messages/{stuck.id}").json()["status"] == "pending"
    body = client.post(f"/v1/messages/{stuck.id}/regenerate", json={"stream": False}).json()
    assert body["status"] == "complete" and body["version"] == 2 and body["reply_to"] == user.id
    old = client.get(f"/v1/messages/{stuck.id}").json()
    assert (old["status"], old["superseded_by"]) == ("interrupted", body["assistant_message_id"])
    assert "interrupted" in old["error"]


def default_kb(c: httpx.Client) -> str:
    return next(kb["id"] for kb in c.get("/v1/knowledge-bases").json()["data"] if kb["default"])


def test_documents_by_name_upload_idempotent_list_remove(client: httpx.Client, server: Server) -> None:
    kb = default_kb(client)
    docs = f"/v1/knowledge-bases/{kb}/documents"
    assert {d["name"] for d in client.get(docs).json()["data"]} >= {"bm25.md", "milvus.md", "fusion.md"}
    text = b"Tea ceremonies in Kyoto follow a precise order of bowls and whisking."
    first = client.put(f"{docs}/tea.md", content=text)
    assert first.status_code == 200 and first.json() == {"name": "tea.md", "status": "added", "chunks": 1}
    try:
        assert client.put(f"{docs}/tea.md", content=text).json()["status"] == "unchanged"
        assert client.put(f"{docs}/tea.md", content=text + b" Matcha.").json()["status"] == "updated"
        listed = {d["name"]: d for d in client.get(docs).json()["data"]}
        assert listed["tea.md"] == {"name": "tea.md", "chunks": 1}
        assert "/" not in "".join(listed)  # names inside the base, never server paths
        rule = assert_error(client.put(f"{docs}/_hidden.md", content=b"x"), 400, "bad_filename")["message"]
        assert "no folders, no hidden files" in rule
        chinese = client.put(f"{docs}/茶叶 笔记.md", content="绿茶不发酵。".encode())  # any script's letters
        assert chinese.status_code == 200 and chinese.json()["status"] == "added", chinese.text
        assert client.delete(f"{docs}/茶叶 笔记.md").status_code == 204
    finally:
        assert client.delete(f"{docs}/tea.md").status_code == 204
    assert "tea.md" not in {d["name"] for d in client.get(docs).json()["data"]}
    assert_error(client.delete(f"{docs}/tea.md"), 404, "not_found")


def test_bad_uploads_are_refused_and_leave_nothing(client: httpx.Client, server: Server) -> None:
    kb = default_kb(client)
    docs = f"/v1/knowledge-bases/{kb}/documents"
    for name in ("..%2F..%2Fescape.md", "a%2Fb.md", ".hidden.md"):  # a path, a folder, a hidden file
        assert_error(client.put(f"{docs}/{name}", content=b"text"), 400, "bad_filename")
    refused = assert_error(client.put(f"{docs}/binary.md", content=b"\x00\x01\x02" * 100), 400, "unreadable_document")
    assert str(server.workdir) not in refused["message"]
    assert not (server.workdir / "uploads" / kb / "binary.md").exists()  # a rejected upload is removed
    assert not list((server.workdir / "uploads").rglob("escape.md"))
    assert "binary.md" not in {d["name"] for d in client.get(docs).json()["data"]}
    # an upload is held to max_upload_bytes (20 MiB here), not to the 64 KiB body limit of the other routes
    bigger = assert_error(client.put(f"{docs}/big.md", content=b"\x00" * (100 << 10)), 400, "unreadable_document")
    assert "max_body_bytes" not in bigger["message"]
    assert not (server.workdir / "uploads" / kb / "big.md").exists()


def test_unreadable_bodies_get_a_clear_error(client: httpx.Client) -> None:
    not_utf8 = client.post("/v1/conversations", content=b'{"title": "\xff\xfe"}',
                           headers={"content-type": "application/json"})
    assert "UTF-8" in assert_error(not_utf8, 400, "invalid_body")["message"]
    assert_error(client.post("/v1/conversations", content=b'{"title": ', headers={"content-type": "application/json"}),
                 400, "invalid_json")


def test_an_open_server_takes_any_bearer_token(client: httpx.Client) -> None:
    r = client.get("/v1/conversations", headers={"Authorization": "Bearer anything-at-all"})
    assert r.status_code == 200, r.text


def test_a_stream_resumes_from_last_event_id_while_running_and_after(client: httpx.Client) -> None:
    cid = new_conversation(client)
    ids: List[int] = []
    seen: List[Tuple[str, Dict[str, Any]]] = []
    with client.stream("POST", f"/v1/conversations/{cid}/messages", json={"content": "What is fusion?"}) as r:
        name = None
        for line in r.iter_lines():
            if line.startswith("id: "):
                ids.append(int(line[4:]))
            elif line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                seen.append((name, json.loads(line[6:])))
                if sum(n == "delta" for n, _ in seen) == 2:
                    break  # the connection drops mid-answer
    mid = seen[0][1]["assistant_message_id"]
    rest_ids: List[int] = []
    with client.stream("GET", f"/v1/messages/{mid}/events", headers={"Last-Event-ID": str(ids[-1])}) as r:
        assert r.status_code == 200
        rest = events(r, rest_ids)
    assert rest_ids[0] == ids[-1] + 1 and rest[-1][0] == "done" and rest[-1][1]["status"] == "complete"
    text = "".join(d["text"] for n, d in seen + rest if n == "delta")
    assert text.strip() == ANSWER.strip()  # every piece once, in order
    with client.stream("GET", f"/v1/messages/{mid}/events", params={"after": 2}) as r:  # finished: replayed
        again = events(r)
    assert [n for n, _ in again] == ["delta", "done"] and again[0][1]["text"].strip() == ANSWER.strip()
    assert_error(client.get(f"/v1/messages/{mid}/events", headers={"Last-Event-ID": "x"}), 400, "bad_event_id")


def test_cancel_stops_a_streaming_answer_at_once(client: httpx.Client, server: Server) -> None:
    cid = new_conversation(client)
    with client.stream("POST", f"/v1/conversations/{cid}/messages", json={"content": "What is fusion?"}) as r:
        evs: List[Tuple[str, Dict[str, Any]]] = []
        lines = r.iter_lines()
        name = None
        for line in lines:
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                evs.append((name, json.loads(line[6:])))
                if name == "delta":
                    break
        mid = evs[0][1]["assistant_message_id"]
        with httpx.Client(base_url=server.url, timeout=60) as other:
            stopped = other.post(f"/v1/messages/{mid}/cancel").json()
        assert stopped["status"] == "cancelled" and ANSWER.startswith(stopped["content"][:10])
        assert "done" not in [line[7:] for line in lines if line.startswith("event: ")]  # the stream just ends
    assert client.post(f"/v1/messages/{mid}/cancel").json()["status"] == "cancelled"  # final: as it is


def test_health_says_which_llm_answers(client: httpx.Client) -> None:
    r = client.get("/v1/health")
    assert r.status_code == 200 and r.json() == {"status": "ok", "llm": "scripted", "answers": "llm"}


def test_streams_tell_clients_when_to_reconnect(client: httpx.Client) -> None:
    cid = new_conversation(client)  # keep-alive comments: tests/serve/test_events.py (they need a silent stream)
    with client.stream("POST", f"/v1/conversations/{cid}/messages", json={"content": "What is fusion?"}) as r:
        lines = list(r.iter_lines())
    assert lines[0] == "retry: 1000" and lines[2] == "id: 1"


def test_cors_answers_the_configured_origin_only(client: httpx.Client) -> None:
    asked = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type"}
    ok = client.options("/v1/conversations", headers={"Origin": CORS_ORIGIN, **asked})
    assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == CORS_ORIGIN
    other = client.options("/v1/conversations", headers={"Origin": "http://evil.example", **asked})
    assert "access-control-allow-origin" not in other.headers


def test_the_schema_documents_every_answer_and_the_bearer_scheme(client: httpx.Client) -> None:
    schema = client.get("/openapi.json").json()
    assert schema["components"]["securitySchemes"]["apiKey"] == {
        "type": "http", "scheme": "bearer", "description": schema["components"]["securitySchemes"]["apiKey"][
            "description"]}
    for path, methods in schema["paths"].items():
        for method, op in methods.items():
            ok = op["responses"].get("200") or op["responses"].get("201") or op["responses"].get("204")
            assert ok is not None, f"{method} {path}"
            if path != "/v1/health":
                assert op["responses"]["401"]["content"]["application/json"]["schema"]["$ref"].endswith("ErrorBody")
    conversation = schema["paths"]["/v1/conversations/{conversation_id}"]["get"]["responses"]["200"]
    assert conversation["content"]["application/json"]["schema"]["$ref"].endswith("ConversationDetail")
