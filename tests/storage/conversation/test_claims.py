"""Turn claims held by workers under a lease, against SQLite and a real PostgreSQL server: exclusive, renewed,
released at once when the worker restarts under its name, lapsed when it stops renewing; a dead worker's answer
keeps the text it saved and is marked ``interrupted``."""

from __future__ import annotations

import time
from typing import Callable

import pytest

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.storage.conversation._sql import SQLConversationStore
from llama_index_convrag.storage.conversation.base import INTERRUPTED_ERROR

Make = Callable[[], SQLConversationStore]


def test_turn_claim_is_exclusive_until_released_or_expired(make_store: Make) -> None:
    a, b = make_store(), make_store()
    cid = a.create_conversation("alice").id
    assert a.claim_turn(cid, 60) and not b.claim_turn(cid, 60)
    assert a.release_turn(cid) and not a.release_turn(cid)
    assert b.claim_turn(cid, 0.000001)
    assert a.claim_turn(cid, 60)  # the first claim expired (a worker that died)


def test_a_worker_renews_its_claims_and_releases_only_its_own(make_store: Make) -> None:
    store = make_store()
    worker, released = store.register_worker("host:8000", lease_s=0.3)
    assert released == []
    cid = store.create_conversation("alice").id
    assert store.claim_turn(cid, 0.3, worker=worker.id) and store.claims_of(worker.id) == [cid]
    for _ in range(3):  # renewed past the first lease: still held
        time.sleep(0.15)
        assert store.renew_worker(worker.id, lease_s=0.3)
    assert not make_store().claim_turn(cid, 60)
    assert not store.release_turn(cid, worker="someone-else")
    assert store.release_turn(cid, worker=worker.id) and store.claims_of(worker.id) == []


def test_a_restarted_worker_frees_its_earlier_claims_at_once(make_store: Make) -> None:
    store = make_store()
    old, _ = store.register_worker("host:8000", lease_s=600)
    cids = [store.create_conversation("alice").id for _ in range(2)]
    for cid in cids:
        assert store.claim_turn(cid, 600, worker=old.id)
    other, _ = store.register_worker("host:8001", lease_s=600)
    assert store.claim_turn(store.create_conversation("bob").id, 600, worker=other.id)
    new, released = make_store().register_worker("host:8000", lease_s=600)  # the same name: a restart
    assert released == sorted(cids) and new.id != old.id
    assert store.claim_turn(cids[0], 600, worker=new.id)
    assert not store.renew_worker(old.id, 600)  # the old one is gone
    assert sorted(w.name for w in store.workers()) == ["host:8000", "host:8001"]
    assert len(store.claims_of(other.id)) == 1


def test_a_dead_workers_claims_lapse_with_its_lease(make_store: Make) -> None:
    store = make_store()
    dead, _ = store.register_worker("a", lease_s=0.2)
    cid = store.create_conversation("alice").id
    assert store.claim_turn(cid, 0.2, worker=dead.id)
    assert not store.claim_turn(cid, 60)
    time.sleep(0.3)  # no renewal: the lease lapsed
    assert store.release_lapsed_workers() == [cid]
    assert [w.id for w in store.workers()] == []
    assert store.claim_turn(cid, 60)
    live, _ = store.register_worker("b", lease_s=60)
    assert store.unregister_worker(live.id) == [] and store.workers() == []


def test_bad_leases_and_names_are_named(make_store: Make) -> None:
    store = make_store()
    with pytest.raises(ConfigurationError, match="lease_s must be > 0 seconds, got 0"):
        store.register_worker("a", lease_s=0)
    with pytest.raises(ConfigurationError, match="a worker's name must be a non-empty string, got ' '"):
        store.register_worker(" ", lease_s=1)


def test_a_dead_workers_answer_keeps_its_saved_text_and_is_interrupted(make_store: Make) -> None:
    store = make_store()
    dead, _ = store.register_worker("a", lease_s=0.2)
    user, answer = store.begin_turn("c", "What is BM25?")
    assert store.claim_turn("c", 0.2, worker=dead.id)
    assert store.save_partial("c", answer.id, "BM25 ranks") and store.save_partial("c", answer.id, "BM25 ranks by")
    assert store.get_conversation("c")[1].content == "BM25 ranks by"  # the cached conversation sees the save
    assert store.save_partial("c", answer.id, "BM25 ranks by term")  # the cached conversation updated in place
    assert "c" in store._history_cache and store.get_conversation("c") == make_store().get_conversation("c")
    time.sleep(0.3)
    assert make_store().release_lapsed_workers() == ["c"]
    kept = store.get_message(answer.id)
    assert (kept.status, kept.content, kept.error) == ("interrupted", "BM25 ranks by term", INTERRUPTED_ERROR)
    assert [m.content for m in store.history("c")] == ["What is BM25?", "BM25 ranks by term"]  # the user saw it
    assert not store.save_partial("c", answer.id, "late")  # a final answer is never rewritten
    assert store.get_message(answer.id).content == "BM25 ranks by term" and store.get_message(user.id).status == "complete"


def test_interrupt_pending_marks_only_pending_answers_of_the_named_conversations(make_store: Make) -> None:
    store = make_store()
    _, done = store.begin_turn("c", "q1")
    store.finalize_message(done.id, content="a1", status="complete")
    _, left = store.begin_turn("c", "q2")
    _, other = store.begin_turn("d", "q")
    assert store.abandoned_in("c") and store.interrupt_pending(["c"]) == [left.id] and not store.abandoned_in("c")
    assert [m.status for m in store.get_conversation("c")] == ["complete", "complete", "complete", "interrupted"]
    assert store.get_message(other.id).status == "pending" and store.interrupt_pending([]) == []
