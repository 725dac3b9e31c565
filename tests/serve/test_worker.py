"""``WorkerLease``: the process's worker registered at startup (its earlier self's claims freed, their answers
``interrupted``), its lease renewed, lapsed workers swept, unregistered at shutdown. A real SQLite store."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from llama_index_convrag.serve.state import Limits, ServeState
from llama_index_convrag.serve.worker import WorkerLease, default_worker_name
from llama_index_convrag.storage.conversation import SQLiteConversationStore


def test_start_frees_its_earlier_self_renews_sweeps_the_dead_and_stop_unregisters(tmp_path: Path) -> None:
    store = SQLiteConversationStore(tmp_path / "chats.db")
    before, _ = store.register_worker("host:8000", lease_s=600)  # this server before a kill -9
    _, stuck = store.begin_turn("a", "kept?")
    assert store.claim_turn("a", 600, worker=before.id)
    dead, _ = store.register_worker("host:8001", lease_s=0.5)  # another server that died
    _, lapsing = store.begin_turn("b", "also kept?")
    assert store.claim_turn("b", 0.5, worker=dead.id)
    state = ServeState(store=store, engine_for=lambda cid, port, kb: None, worker_name="host:8000",
                       limits=Limits(lease_s=0.3))

    async def run() -> None:
        lease = WorkerLease(state)
        assert "a" in await lease.start()  # at once: no wait for the 600 s lease (b too if its lease lapsed by now)
        assert store.get_message(stuck.id).status == "interrupted" and state.worker_id is not None
        assert store.claim_turn("a", 0.3, worker=state.worker_id)
        deadline = time.monotonic() + 10
        while store.get_message(lapsing.id).status == "pending" and time.monotonic() < deadline:
            await asyncio.sleep(0.05)  # the dead worker's lease lapses; a renewal round sweeps it
        assert store.get_message(lapsing.id).status == "interrupted"
        await asyncio.sleep(0.5)  # past the first lease: renewed, so the claim still holds
        assert store.claims_of(state.worker_id) == ["a"]
        await lease.stop()
        assert state.worker_id is None and store.workers() == [] and store.claim_turn("a", 1)

    asyncio.run(run())
    store.close()


def test_the_lease_is_renewed_while_the_event_loop_is_blocked(tmp_path: Path) -> None:
    store = SQLiteConversationStore(tmp_path / "chats.db")
    _, stuck = store.begin_turn("a", "held through a busy loop?")
    state = ServeState(store=store, engine_for=lambda cid, port, kb: None, worker_name="host:8000",
                       limits=Limits(lease_s=0.3))

    async def run() -> None:
        lease = WorkerLease(state)
        await lease.start()
        assert store.claim_turn("a", 0.3, worker=state.worker_id)
        time.sleep(1.2)  # the loop does nothing else for four leases: an overloaded server
        assert store.claims_of(state.worker_id) == ["a"]
        assert store.get_message(stuck.id).status == "pending"
        await lease.stop()

    asyncio.run(run())
    store.close()


def test_the_default_name_is_unique_to_the_process() -> None:
    import os

    assert default_worker_name().endswith(f":{os.getpid()}")
