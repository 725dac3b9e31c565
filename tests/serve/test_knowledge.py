"""Knowledge bases with roles over real HTTP (the session's server process, with keys made for this module and
revoked after it): a reader cannot upload or delete (403), an editor can, another team's base is 404 and so are
its conversations; key scopes and the admin routes."""

from __future__ import annotations

from typing import Dict, Iterator

import httpx
import pytest

from llama_index_convrag.storage.conversation import SQLiteConversationStore
from tests.serve.conftest import Server
from tests.serve.test_api import assert_error

PEOPLE = ("alice", "bob", "carol", "dave", "root")


@pytest.fixture(scope="module")
def keys(server: Server) -> Iterator[Dict[str, Dict[str, str]]]:
    """Bearer headers: alice (owner of team-a), bob (reader), carol (editor), dave (another team), root (admin),
    bob_chat (bob's key with the chat scope only)."""
    store = SQLiteConversationStore(server.workdir / "chats.db")
    store.ensure_user("root", role="admin")
    made = {who: store.create_key(who, ["chat", "edit", "admin"] if who == "root" else ["chat", "edit"])
            for who in PEOPLE}
    made["bob_chat"] = store.create_key("bob", ["chat"])
    try:
        yield {who: {"Authorization": f"Bearer {secret}"} for who, (_, secret) in made.items()}
    finally:  # the session's server is open again for the other modules
        for key, _ in made.values():
            store.revoke_key(key.id)
        store.close()


@pytest.fixture(scope="module")
def team(server: Server, keys: Dict[str, Dict[str, str]]) -> Iterator[str]:
    with httpx.Client(base_url=server.url, timeout=120) as c:
        made = c.post("/v1/knowledge-bases", json={"name": "team-a", "description": "alice's team"},
                      headers=keys["alice"])
        assert made.status_code == 201, made.text
        kb = made.json()
        assert (kb["role"], kb["owner"], kb["default"], kb["model"]) == ("owner", "alice", False, "convrag/team-a")
        members = f"/v1/knowledge-bases/{kb['id']}/members"
        assert c.put(f"{members}/bob", json={"role": "reader"}, headers=keys["alice"]).status_code == 200
        assert c.put(f"{members}/carol", json={"role": "editor"}, headers=keys["alice"]).status_code == 200
        yield kb["id"]
        assert c.delete(f"/v1/knowledge-bases/{kb['id']}", headers=keys["alice"]).status_code == 204


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=120) as c:
        yield c


def test_each_role_sees_and_does_what_it_may(client: httpx.Client, keys: Dict[str, Dict[str, str]],
                                             team: str) -> None:
    docs = f"/v1/knowledge-bases/{team}/documents"
    text = b"Team A keeps its runbooks in the blue binder on the third shelf."
    # the reader reads but cannot change the documents
    assert client.get(docs, headers=keys["bob"]).json() == {"data": []}
    refused = assert_error(client.put(f"{docs}/runbook.md", content=text, headers=keys["bob"]), 403,
                           "insufficient_role")
    assert refused["message"] == "this needs the role editor or owner in knowledge base 'team-a'; yours is reader"
    # the editor uploads; the reader sees it, cannot delete it
    put = client.put(f"{docs}/runbook.md", content=text, headers=keys["carol"])
    assert put.status_code == 200 and put.json()["status"] == "added", put.text
    assert [d["name"] for d in client.get(docs, headers=keys["bob"]).json()["data"]] == ["runbook.md"]
    assert_error(client.delete(f"{docs}/runbook.md", headers=keys["bob"]), 403, "insufficient_role")
    # another team: the base, its documents, its members are 404, exactly as an unknown id
    for path in (f"/v1/knowledge-bases/{team}", docs, f"/v1/knowledge-bases/{team}/members"):
        assert_error(client.get(path, headers=keys["dave"]), 404, "not_found")
    assert_error(client.put(f"{docs}/x.md", content=text, headers=keys["dave"]), 404, "not_found")
    assert team not in {kb["id"] for kb in client.get("/v1/knowledge-bases", headers=keys["dave"]).json()["data"]}
    # only the owner shares and deletes
    assert_error(client.put(f"/v1/knowledge-bases/{team}/members/dave", json={"role": "reader"},
                            headers=keys["carol"]), 403, "insufficient_role")
    assert_error(client.delete(f"/v1/knowledge-bases/{team}", headers=keys["carol"]), 403, "insufficient_role")
    # a key without the edit scope cannot change anything, whatever the role
    assert_error(client.put(f"{docs}/again.md", content=text, headers=keys["bob_chat"]), 403, "insufficient_scope")
    assert_error(client.post("/v1/knowledge-bases", json={"name": "bobs"}, headers=keys["bob_chat"]), 403,
                 "insufficient_scope")
    assert client.delete(f"{docs}/runbook.md", headers=keys["carol"]).status_code == 204


def test_conversations_answer_from_their_base_and_stay_their_owners(
        client: httpx.Client, keys: Dict[str, Dict[str, str]], team: str) -> None:
    docs = f"/v1/knowledge-bases/{team}/documents"
    assert client.put(f"{docs}/owls.md", content=b"Barn owls hunt voles by sound in complete darkness.",
                      headers=keys["alice"]).status_code == 200
    try:
        cid = client.post("/v1/conversations", json={"knowledge_base": team}, headers=keys["bob"]).json()["id"]
        body = client.post(f"/v1/conversations/{cid}/messages", json={"content": "How do owls hunt?",
                                                                      "stream": False}, headers=keys["bob"]).json()
        assert body["status"] == "complete" and [r["document"] for r in body["references"]] == ["owls.md"]
        assert client.get(f"/v1/conversations/{cid}", headers=keys["bob"]).json()["knowledge_base"] == team
        # dave may not bind a conversation to it, nor read bob's
        assert_error(client.post("/v1/conversations", json={"knowledge_base": team}, headers=keys["dave"]), 404,
                     "not_found")
        assert_error(client.get(f"/v1/conversations/{cid}", headers=keys["dave"]), 404, "not_found")
        # the OpenAI endpoint: the base is a model; another team's model does not exist for dave
        assert "convrag/team-a" in [m["id"] for m in client.get("/v1/models", headers=keys["bob"]).json()["data"]]
        missing = client.post("/v1/chat/completions", headers=keys["dave"], json={
            "model": "convrag/team-a", "messages": [{"role": "user", "content": "owls?"}]})
        err = assert_error(missing, 404, "model_not_found")
        assert err["type"] == "invalid_request_error" and err["param"] == "model"
        # bob loses his role: his conversation stays his, its base no longer answers him
        assert client.delete(f"/v1/knowledge-bases/{team}/members/bob", headers=keys["alice"]).status_code == 204
        assert_error(client.post(f"/v1/conversations/{cid}/messages", json={"content": "And mice?"},
                                 headers=keys["bob"]), 404, "not_found")
        assert client.get(f"/v1/conversations/{cid}", headers=keys["bob"]).status_code == 200
    finally:
        client.put(f"/v1/knowledge-bases/{team}/members/bob", json={"role": "reader"}, headers=keys["alice"])
        client.delete(f"{docs}/owls.md", headers=keys["alice"])


def test_the_servers_own_base_is_read_by_everyone_and_kept(client: httpx.Client,
                                                         keys: Dict[str, Dict[str, str]]) -> None:
    own = [kb for kb in client.get("/v1/knowledge-bases", headers=keys["dave"]).json()["data"] if kb["default"]]
    assert [(kb["role"], kb["model"]) for kb in own] == [("reader", "convrag")]
    docs = f"/v1/knowledge-bases/{own[0]['id']}/documents"
    assert_error(client.put(f"{docs}/x.md", content=b"x", headers=keys["dave"]), 403, "insufficient_role")
    assert_error(client.delete(f"/v1/knowledge-bases/{own[0]['id']}", headers=keys["root"]), 400,
                 "default_knowledge_base")


def test_admin_routes_need_an_admin_key(client: httpx.Client, keys: Dict[str, Dict[str, str]]) -> None:
    assert_error(client.get("/v1/admin/users", headers=keys["alice"]), 403, "insufficient_scope")
    users = {u["id"]: u["role"] for u in client.get("/v1/admin/users", headers=keys["root"]).json()["data"]}
    assert users["root"] == "admin" and users["alice"] == "member"
    made = client.post("/v1/admin/keys", json={"user_id": "erin", "scopes": ["chat"]}, headers=keys["root"])
    assert made.status_code == 201 and made.json()["scopes"] == ["chat"]
    erin = {"Authorization": f"Bearer {made.json()['key']}"}
    assert client.get("/v1/conversations", headers=erin).status_code == 200
    assert client.delete(f"/v1/admin/keys/{made.json()['id']}", headers=keys["root"]).status_code == 204
    assert_error(client.get("/v1/conversations", headers=erin), 401, "invalid_api_key")
    # every knowledge base is the admin's to manage
    assert all(kb["role"] == "owner" for kb in client.get("/v1/knowledge-bases", headers=keys["root"]).json()["data"])
