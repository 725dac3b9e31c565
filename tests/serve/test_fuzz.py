"""Property-based fuzzing of every operation of the OpenAPI schema (schemathesis) against a real server process,
with the key of each kind of caller in turn (an admin, the owner of a knowledge base, a reader of it with a
chat-only key, a user with no role in it): never a 5xx, every error in the one JSON shape, and never an exception's
type and text in a body. The server has every part of memory on (its routes and its writes are fuzzed too). Bounded (few examples per operation, derandomised); a longer run is
``bench/serve_fuzz.py --examples N``."""

from __future__ import annotations

import re
from typing import Dict, List

import httpx
import pytest

schemathesis = pytest.importorskip("schemathesis", reason="pip install 'llama-index-convrag[test]' (schemathesis)")
from hypothesis import HealthCheck, given, settings  # noqa: E402

from llama_index_convrag.storage.conversation import SQLiteConversationStore  # noqa: E402
from tests.serve.conftest import MEMORY_SERVER_TURNS_PER_MINUTE, Server  # noqa: E402

ERROR_KEYS = {"type", "code", "message", "param"}
#: this module's server's turn rate limit per key
TURNS_PER_MINUTE = MEMORY_SERVER_TURNS_PER_MINUTE
#: what an exception's text looks like in a body: "ValueError: ...", "sqlite3.OperationalError: ...", a traceback
EXCEPTION_TEXT = re.compile(r"Traceback \(most recent call last\)|\b[A-Za-z_.]*(Error|Exception)\b: ")


@pytest.fixture(scope="module")
def fuzz_server(memory_server: Server) -> Server:
    return memory_server


@pytest.fixture(scope="module")
def role_headers(fuzz_server: Server) -> List[Dict[str, str]]:
    """One bearer header per kind of caller; the owner's base has the reader as a member."""
    store = SQLiteConversationStore(fuzz_server.workdir / "chats.db")
    try:
        store.ensure_user("admin", role="admin")
        secrets = {"admin": store.create_key("admin", ["chat", "edit", "admin"])[1],
                   "owner": store.create_key("owner")[1], "reader": store.create_key("reader", ["chat"])[1],
                   "stranger": store.create_key("stranger")[1]}
    finally:
        store.close()
    headers = {who: {"Authorization": f"Bearer {secret}"} for who, secret in secrets.items()}
    with httpx.Client(base_url=fuzz_server.url, timeout=120) as c:
        kb = c.post("/v1/knowledge-bases", json={"name": "fuzzed"}, headers=headers["owner"]).json()["id"]
        c.put(f"/v1/knowledge-bases/{kb}/members/reader", json={"role": "reader"}, headers=headers["owner"])
    return [headers[who] for who in ("admin", "owner", "reader", "stranger")]


@pytest.fixture(scope="module")
def api_schema(fuzz_server: Server) -> object:
    return schemathesis.openapi.from_url(fuzz_server.url + "/openapi.json")


def test_no_5xx_one_error_shape_and_no_internals(api_schema: "schemathesis.BaseSchema",
                                                 role_headers: List[Dict[str, str]]) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 37  # every route of docs/SERVE.md is in the schema
    memory_routes = {(o.method.upper(), o.path) for o in operations if "summary" in o.path or "/memory" in o.path}
    assert memory_routes == {("GET", "/v1/memory"), ("GET", "/v1/conversations/{conversation_id}/summary"),
                             ("PUT", "/v1/conversations/{conversation_id}/summary"),
                             ("DELETE", "/v1/conversations/{conversation_id}/summary"),
                             ("GET", "/v1/conversations/{conversation_id}/summary/versions"),
                             ("GET", "/v1/memory/facts"), ("DELETE", "/v1/memory/facts"),
                             ("DELETE", "/v1/memory/facts/{fact_id}")}
    statuses: list = []
    for operation in operations:
        calls = iter(range(10 ** 6))

        @settings(max_examples=4, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def check(case: "schemathesis.Case") -> None:
            headers = role_headers[next(calls) % len(role_headers)]
            response = case.call(timeout=60, headers=headers)
            statuses.append(response.status_code)
            where = f"{case.method} {case.formatted_path}"
            assert response.status_code < 500, f"{where}: {response.status_code} {response.text}"
            assert not EXCEPTION_TEXT.search(response.text), f"{where}: an exception's text: {response.text[:300]}"
            if response.status_code >= 400:
                body = response.json()
                assert set(body) == {"error"} and set(body["error"]) == ERROR_KEYS, f"{where}: {response.text}"

        check()
    assert any(s < 300 for s in statuses) and {403, 404} <= set(statuses), sorted(set(statuses))
    print(f"{len(statuses)} calls over {len(operations)} operations; statuses {sorted(set(statuses))}")


def test_a_client_in_a_loop_gets_429_with_retry_after(fuzz_server: Server, role_headers: List[Dict[str, str]]) -> None:
    guessed = {"Authorization": "Bearer ck_guessing"}  # counted by its hash before it is checked: guessing is limited
    body = {"model": "convrag", "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(base_url=fuzz_server.url, timeout=60) as c:
        statuses = [c.post("/v1/chat/completions", json=body, headers=guessed).status_code
                    for _ in range(TURNS_PER_MINUTE)]
        assert statuses == [401] * TURNS_PER_MINUTE
        limited = c.post("/v1/chat/completions", json=body, headers=guessed)
        assert limited.status_code == 429 and limited.json()["error"]["code"] == "rate_limited"
        assert 1 <= int(limited.headers["Retry-After"]) <= 60 and "turns" in limited.json()["error"]["message"]
        assert c.get("/v1/conversations", headers=role_headers[0]).status_code == 200  # other keys are not limited
