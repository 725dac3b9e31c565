"""Memory in ``convrag serve`` over real HTTP against a real uvicorn process (SQLite store, Milvus Lite, the local
embedding model, ScriptedLLMs; the ``memory_server`` the fuzz test shares): a conversation longer than the recent window (2 messages here) recalls its earlier
messages, keeps a running summary and the user's facts, written after each turn commits; the memory routes read,
edit and delete them for their owner only."""

from __future__ import annotations

import time
from typing import Any, Dict, Iterator, List

import httpx
import pytest

from llama_index_convrag.storage.conversation import SQLiteConversationStore
from tests.serve.conftest import Server
from tests.serve.server_app import SUMMARY
from tests.serve.test_api import assert_error

FACT_QUESTION = "My favourite database is Milvus Lite."
QUESTIONS = [FACT_QUESTION, "What is BM25?", "How does rank fusion work?", "Which database did I say I like?"]


@pytest.fixture(scope="module")
def keys(memory_server: Server) -> Dict[str, Dict[str, str]]:
    """Bearer headers: alice, bob and carol (chat only: the scope of one's own memory) and an edit-only key of alice's."""
    store = SQLiteConversationStore(memory_server.workdir / "chats.db")
    try:
        secrets = {"alice": store.create_key("alice", ["chat"])[1], "bob": store.create_key("bob", ["chat"])[1],
                   "carol": store.create_key("carol", ["chat"])[1],
                   "alice_edit": store.create_key("alice", ["edit"])[1]}
    finally:
        store.close()
    return {who: {"Authorization": f"Bearer {secret}"} for who, secret in secrets.items()}


@pytest.fixture(scope="module")
def c(memory_server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=memory_server.url, timeout=60) as client:
        yield client


def turn(c: httpx.Client, headers: Dict[str, str], cid: str, question: str) -> Dict[str, Any]:
    r = c.post(f"/v1/conversations/{cid}/messages", json={"content": question, "stream": False}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def summary_versions(c: httpx.Client, headers: Dict[str, str], cid: str, at_least: int) -> Dict[str, Any]:
    """The summary once ``at_least`` versions are written (the writes run after each turn, in order)."""
    deadline = time.monotonic() + 60
    while True:
        body = c.get(f"/v1/conversations/{cid}/summary", headers=headers).json()
        if body["versions"] >= at_least or time.monotonic() > deadline:
            return body
        time.sleep(0.1)


def settled(c: httpx.Client, headers: Dict[str, str]) -> None:
    """Until the server's memory writes are done (a fold reads the conversation as it is when it runs: a write that
    runs after the next turn began folds that turn's question too)."""
    deadline = time.monotonic() + 60
    while c.get("/v1/memory", headers=headers).json()["pending_writes"] and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.fixture(scope="module")
def alice_conversation(c: httpx.Client, keys: Dict[str, Dict[str, str]]) -> Dict[str, Any]:
    """Alice's conversation of four turns; before each turn the previous turns' writes have run (the summary's
    versions 1, 2, 3 are written after turns 2, 3, 4)."""
    cid = c.post("/v1/conversations", json={"title": "long"}, headers=keys["alice"]).json()["id"]
    turns: List[Dict[str, Any]] = []
    for question in QUESTIONS:
        settled(c, keys["alice"])
        turns.append(turn(c, keys["alice"], cid, question))
    settled(c, keys["alice"])
    return {"id": cid, "turns": turns, "summary": summary_versions(c, keys["alice"], cid, len(QUESTIONS) - 1)}


def test_memory_status_names_the_parts_on(c: httpx.Client, keys: Dict[str, Dict[str, str]]) -> None:
    body = c.get("/v1/memory", headers=keys["alice"]).json()
    writes = {k: body.pop(k) for k in ("pending_writes", "failed_writes")}
    assert body == {"parts": ["recall", "summary", "facts"], "summary_max_tokens": 400, "recall_k": 10, "window": 2}
    assert writes["pending_writes"] >= 0 and writes["failed_writes"] == 0
    assert_error(c.get("/v1/memory", headers=keys["alice_edit"]), 403, "insufficient_scope")


def test_a_conversation_longer_than_the_window_recalls_summarises_and_keeps_facts(
        c: httpx.Client, keys: Dict[str, Dict[str, str]], alice_conversation: Dict[str, Any]) -> None:
    cid, turns = alice_conversation["id"], alice_conversation["turns"]
    messages = c.get(f"/v1/conversations/{cid}", headers=keys["alice"]).json()["messages"]
    ids = [m["id"] for m in messages]
    summary = alice_conversation["summary"]
    assert summary["versions"] == 3 and summary["max_tokens"] == 400
    current = summary["summary"]
    assert (current["text"], current["source"], current["version"]) == (SUMMARY, "llm", 3)
    assert 0 < current["tokens"] <= 400 and current["covers_to"] in ids and current["covered"] == 6
    # the last turn: the summary, the fact and the messages before its window reached its prompt
    record = c.get(f"/v1/messages/{turns[-1]['assistant_message_id']}/turn", headers=keys["alice"]).json()
    memory = record["memory"]
    assert memory["summary"]["version"] == 2  # what the turn read: turn 3's fold ran after it committed
    assert [f["text"] for f in memory["facts"]] == [FACT_QUESTION]
    recalled = [u["message_id"] for u in memory["recall"]["units"]]
    assert turns[0]["user_message_id"] in recalled and set(recalled) <= set(ids[:4])  # before the window only
    assert SUMMARY in record["context"]["memory_text"] and FACT_QUESTION in record["context"]["memory_text"]
    facts = c.get("/v1/memory/facts", headers=keys["alice"]).json()["data"]
    assert [(f["text"], f["source_message_id"], f["conversation_id"], f["status"]) for f in facts] == [
        (FACT_QUESTION, turns[0]["user_message_id"], cid, "active")]
    # a regenerated answer loads its memory the same way
    r = c.post(f"/v1/messages/{turns[-1]['assistant_message_id']}/regenerate", json={"stream": False},
               headers=keys["alice"])
    assert r.status_code == 200, r.text
    again = c.get(f"/v1/messages/{r.json()['assistant_message_id']}/turn", headers=keys["alice"]).json()
    assert turns[0]["user_message_id"] in [u["message_id"] for u in again["memory"]["recall"]["units"]]


def test_nothing_crosses_users(c: httpx.Client, keys: Dict[str, Dict[str, str]],
                               alice_conversation: Dict[str, Any]) -> None:
    cid, alice_ids = alice_conversation["id"], {t["user_message_id"] for t in alice_conversation["turns"]}
    bob = keys["bob"]
    for method, path in (("GET", f"/v1/conversations/{cid}/summary"),
                         ("GET", f"/v1/conversations/{cid}/summary/versions"),
                         ("DELETE", f"/v1/conversations/{cid}/summary")):
        assert_error(c.request(method, path, headers=bob), 404, "not_found")
    assert_error(c.put(f"/v1/conversations/{cid}/summary", json={"text": "mine now"}, headers=bob), 404, "not_found")
    fact = c.get("/v1/memory/facts", headers=keys["alice"]).json()["data"][0]["id"]
    assert_error(c.delete(f"/v1/memory/facts/{fact}", headers=bob), 404, "not_found")
    assert c.get("/v1/memory/facts", headers=bob).json() == {"data": []}
    # bob's own long conversation recalls his messages only, and reads none of alice's facts
    bid = c.post("/v1/conversations", json={}, headers=bob).json()["id"]
    done = [turn(c, bob, bid, q) for q in ("Which database did I say I like?", "What is BM25?", "And fusion?")]
    settled(c, bob)
    done.append(turn(c, bob, bid, "Which database did I say I like?"))
    memory = c.get(f"/v1/messages/{done[-1]['assistant_message_id']}/turn", headers=bob).json()["memory"]
    recalled = {u["message_id"] for u in memory["recall"]["units"]}
    assert recalled and recalled <= {t["user_message_id"] for t in done} | {
        m["id"] for m in c.get(f"/v1/conversations/{bid}", headers=bob).json()["messages"]}
    assert not recalled & alice_ids and memory["facts"] == []
    assert c.get("/v1/memory/facts", headers=keys["alice"]).json()["data"][0]["id"] == fact  # still alice's


def test_edit_versions_and_clear_the_summary(c: httpx.Client, keys: Dict[str, Dict[str, str]],
                                             alice_conversation: Dict[str, Any]) -> None:
    alice, cid = keys["alice"], c.post("/v1/conversations", json={}, headers=keys["alice"]).json()["id"]
    assert c.get(f"/v1/conversations/{cid}/summary", headers=alice).json() == {
        "conversation_id": cid, "summary": None, "versions": 0, "max_tokens": 400}
    edited = c.put(f"/v1/conversations/{cid}/summary", json={"text": "Ana is the user's sister."}, headers=alice)
    assert edited.status_code == 200, edited.text
    assert (edited.json()["version"], edited.json()["source"], edited.json()["text"]) == (
        1, "edit", "Ana is the user's sister.")
    c.put(f"/v1/conversations/{cid}/summary", json={"text": "Ana is the user's older sister."}, headers=alice)
    versions = c.get(f"/v1/conversations/{cid}/summary/versions", headers=alice).json()["data"]
    assert [(v["version"], v["text"]) for v in versions] == [
        (1, "Ana is the user's sister."), (2, "Ana is the user's older sister.")]
    long = c.put(f"/v1/conversations/{cid}/summary", json={"text": "word " * 1000}, headers=alice)
    error = assert_error(long, 400, "summary_too_long")
    assert "1001 tokens" in error["message"] and "400" in error["message"] and error["param"] == "text"
    assert_error(c.put(f"/v1/conversations/{cid}/summary", json={"text": "  "}, headers=alice), 400, "empty_summary")
    assert c.get(f"/v1/conversations/{cid}/summary", headers=alice).json()["versions"] == 2  # nothing written
    assert c.delete(f"/v1/conversations/{cid}/summary", headers=alice).status_code == 204
    assert c.get(f"/v1/conversations/{cid}/summary", headers=alice).json()["summary"] is None
    assert_error(c.get("/v1/conversations/nope/summary", headers=alice), 404, "not_found")


def test_delete_one_fact_then_all(c: httpx.Client, keys: Dict[str, Dict[str, str]]) -> None:
    carol = keys["carol"]
    cid = c.post("/v1/conversations", json={}, headers=carol).json()["id"]
    for q in ("My dog is called Rex.", "My home town is Porto."):
        turn(c, carol, cid, q)
    deadline = time.monotonic() + 60
    while len(c.get("/v1/memory/facts", headers=carol).json()["data"]) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    facts = c.get("/v1/memory/facts", headers=carol).json()["data"]
    assert [f["text"] for f in facts] == ["My dog is called Rex.", "My home town is Porto."]
    assert c.delete(f"/v1/memory/facts/{facts[0]['id']}", headers=carol).status_code == 204
    assert_error(c.delete(f"/v1/memory/facts/{facts[0]['id']}", headers=carol), 404, "not_found")
    assert [f["text"] for f in c.get("/v1/memory/facts", headers=carol).json()["data"]] == ["My home town is Porto."]
    assert_error(c.delete("/v1/memory/facts", headers=carol), 400, "confirm_needed")
    assert c.delete("/v1/memory/facts", params={"confirm": "true"}, headers=carol).json() == {"deleted": 1}
    assert c.get("/v1/memory/facts", params={"history": "true"}, headers=carol).json() == {"data": []}


def test_deleting_a_conversation_deletes_its_summary_and_keeps_facts(c: httpx.Client,
                                                                    keys: Dict[str, Dict[str, str]]) -> None:
    alice = keys["alice"]
    cid = c.post("/v1/conversations", json={}, headers=alice).json()["id"]
    for q in ("My cat is called Tom.", "What is BM25?", "What is Milvus Lite?"):
        turn(c, alice, cid, q)
    assert summary_versions(c, alice, cid, 1)["versions"] >= 1
    before = c.get("/v1/memory/facts", headers=alice).json()["data"]
    assert c.delete(f"/v1/conversations/{cid}", headers=alice).status_code == 204
    assert_error(c.get(f"/v1/conversations/{cid}/summary", headers=alice), 404, "not_found")
    assert "My cat is called Tom." in [f["text"] for f in before]
    assert c.get("/v1/memory/facts", headers=alice).json()["data"] == before  # facts are the user's


def test_the_openai_endpoint_is_unchanged_with_memory_on(c: httpx.Client, keys: Dict[str, Dict[str, str]]) -> None:
    body = {"model": "convrag", "messages": [{"role": "user", "content": "What is BM25?"}]}
    r = c.post("/v1/chat/completions", json=body, headers=keys["alice"])
    assert r.status_code == 200, r.text
    out = r.json()
    assert set(out) == {"id", "object", "created", "model", "choices", "usage", "convrag"}
    assert out["object"] == "chat.completion" and out["choices"][0]["message"]["role"] == "assistant"


def test_openapi_documents_the_memory_routes(c: httpx.Client) -> None:
    schema = c.get("/openapi.json").json()
    paths = schema["paths"]
    assert {"get", "put", "delete"} <= set(paths["/v1/conversations/{conversation_id}/summary"])
    assert {"get", "delete"} <= set(paths["/v1/memory/facts"]) and "delete" in paths["/v1/memory/facts/{fact_id}"]
    ok = paths["/v1/conversations/{conversation_id}/summary"]["get"]["responses"]["200"]
    assert ok["content"]["application/json"]["schema"]["$ref"].endswith("/SummaryOut")
    assert {"SummaryOut", "SummaryVersionOut", "FactOut", "FactList", "MemoryStatus"} <= set(
        schema["components"]["schemas"])


def test_memory_off_the_routes_read_what_is_stored(server: Server) -> None:
    """The session server has memory off: nothing is written, the routes answer from the store."""
    with httpx.Client(base_url=server.url, timeout=60) as client:
        assert client.get("/v1/memory").json()["parts"] == []
        cid = client.post("/v1/conversations", json={}).json()["id"]
        assert client.get(f"/v1/conversations/{cid}/summary").json()["summary"] is None
        assert client.put(f"/v1/conversations/{cid}/summary", json={"text": "kept"}).json()["version"] == 1
