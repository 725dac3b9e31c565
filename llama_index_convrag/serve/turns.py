"""One served turn as a stream of ``(event, data)`` pairs, shared by the conversation API and the OpenAI endpoint.

:func:`open_turn` does the turn's first database work in one store call (``ServeState.store_call``: in the
thread pool unless ``store_on_loop``): the caller's check (ownership), the turn claim (one turn in flight per
conversation, else 409) and storing the user message and the assistant placeholder
(:meth:`~.turn_store.TurnStore.prepare`). :func:`turn_events` then yields ``start`` (the ids, before retrieval),
``retrieval`` when the engine hands back its stream, ``delta`` per piece of text, and last ``done`` or ``error``,
after one more store call has written the answer and released the claim. The engine runs on the event loop and
touches no database in between. When the consumer stops (the client went away: the stream's task is cancelled) the
engine's stream is closed, which finalises the message ``cancelled`` with the text so far (no text when the engine
had not answered yet); the claim is released in every case.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, AsyncGenerator, Callable, Dict, List, Optional, Tuple

import anyio

from llama_index_convrag.serve.errors import APIError, error_body
from llama_index_convrag.serve.models import raw_citation
from llama_index_convrag.serve.state import ServeState
from llama_index_convrag.serve.turn_store import Finished, TurnStore
from llama_index_convrag.storage.conversation.base import Message

logger = logging.getLogger(__name__)
Event = Tuple[str, Dict[str, Any]]


@dataclass(frozen=True)
class OpenTurn:
    """A claimed turn whose user message and placeholder are stored."""

    conversation_id: str
    question: str
    store: TurnStore
    user: Message
    placeholder: Message
    #: ``time.perf_counter()`` when the turn's request arrived (the ``done`` event's ``timings`` count from it)
    began: float
    #: what ``check`` returned: the knowledge base the turn answers from (handed to ``state.engine_for``)
    knowledge_base: Any = None


async def open_turn(state: ServeState, conversation_id: str, question: str, regenerate: Optional[Message] = None,
                    check: Optional[Callable[[], Any]] = None,
                    claimed: Optional[Callable[[], None]] = None, began: Optional[float] = None) -> OpenTurn:
    """In one store call (``state.store_call``): run ``check`` (it raises the route's 4xx; it returns the turn's
    knowledge base), claim the conversation (409
    ``turn_in_flight`` when another turn holds it), run ``claimed`` (work that needs the claim) and store the
    turn. ``began``: when the request arrived (``limits.arrived_at``; None: now)."""
    opened: List[OpenTurn] = []
    began = began if began is not None else time.perf_counter()

    def work() -> OpenTurn:
        knowledge_base = check() if check is not None else None
        if not state.store.claim_turn(conversation_id, state.limits.turn_timeout_s):
            raise APIError(409, "turn_in_flight", f"conversation {conversation_id!r} is answering another turn; "
                                                  "wait for its done/error event (or cancel it) and retry")
        store = TurnStore(state.store, regenerate=regenerate)
        try:
            if claimed is not None:
                claimed()
            user, placeholder = store.prepare(conversation_id, question)
        except BaseException:
            state.store.release_turn(conversation_id)
            raise
        opened.append(OpenTurn(conversation_id, question, store, user, placeholder, began, knowledge_base))
        return opened[0]

    try:
        return await state.store_call(work)
    except asyncio.CancelledError:  # the request went away while the thread ran: undo what it did
        if opened:
            with anyio.CancelScope(shield=True):
                await state.store_call(close_turn, state, opened[0])
        raise


def close_turn(state: ServeState, turn: OpenTurn) -> Finished:
    """Write the answer (or ``cancelled``) and release the claim (blocking: ``state.store_call`` it)."""
    try:
        return turn.store.flush()
    finally:
        state.store.release_turn(turn.conversation_id)


def references(response: Any) -> List[Dict[str, Any]]:
    """The retrieved passages the answer sees, in source order."""
    out = []
    for i, n in enumerate(getattr(response, "source_nodes", None) or [], start=1):
        node = n.node
        out.append({"source_index": i, "node_id": node.node_id, "ref_doc_id": node.ref_doc_id, "score": n.score,
                    "text": node.get_content(), "metadata": dict(node.metadata)})
    return out


def retrieval_data(response: Any) -> Dict[str, Any]:
    """The retrieval query, why it reads so (the turn record's rewrite fields) and the references."""
    record = (getattr(response, "metadata", None) or {}).get("turn")
    rewrite = None if record is None else {
        "strategy": record.rewrite_strategy, "used_llm": record.rewrite_used_llm,
        "skipped_reason": record.rewrite_skipped_reason, "fallback_reason": record.rewrite_fallback_reason}
    return {"retrieval_query": None if record is None else record.retrieval_query, "rewrite": rewrite,
            "references": references(response)}


def start_data(user: Message, placeholder: Message) -> Dict[str, Any]:
    return {"conversation_id": placeholder.conversation_id, "user_message_id": user.id,
            "assistant_message_id": placeholder.id, "reply_to": placeholder.reply_to, "version": placeholder.version}


def done_data(message_id: str, finished: Finished, response: Any, timings: Dict[str, float]) -> Dict[str, Any]:
    """The final event: the answer as written, its citations, the trim report and the turn's timings."""
    trim = (getattr(response, "metadata", None) or {}).get("trim_report")
    trim_view = trim.to_dict() if hasattr(trim, "to_dict") else trim if isinstance(trim, dict) else None
    return {"assistant_message_id": message_id, "status": finished.status, "content": finished.content,
            "citations": [raw_citation(c) for c in finished.citations], "trim_report": trim_view,
            "timings": timings}


def timings(turn: OpenTurn, engine_began: float, engine_s: float) -> Dict[str, float]:
    """From the request's arrival: ``server_ms`` to the final event, ``start_ms`` to the engine's start (the key
    check, the first store call, the ``start`` event); ``engine_ms``: the engine's part (retrieval to the last token).
    ``server_ms - engine_ms`` is the server's own work (routing, key check, store calls, events) and its waits for
    the loop."""
    return {"server_ms": round(1000 * (time.perf_counter() - turn.began), 3),
            "start_ms": round(1000 * (engine_began - turn.began), 3), "engine_ms": round(1000 * engine_s, 3)}


async def turn_events(state: ServeState, turn: OpenTurn) -> AsyncGenerator[Event, None]:
    """Run one opened turn (see the module docstring)."""
    response: Any = None
    closed = False
    try:
        yield "start", start_data(turn.user, turn.placeholder)
        failure: Optional[BaseException] = None
        engine_began = time.perf_counter()
        try:
            response = await state.engine_for(turn.conversation_id, turn.store,
                                              turn.knowledge_base).astream_chat(turn.question)
            yield "retrieval", retrieval_data(response)
            async for delta in response.async_response_gen():
                yield "delta", {"text": delta}
            if response.status == "error":
                failure = RuntimeError("the answer stream failed")
        except Exception as e:  # the engine finalised the message as error (when it got that far)
            logger.warning("turn failed (error id %s, conversation %s)", turn.placeholder.id, turn.conversation_id,
                           exc_info=e)
            failure = e
        engine_s = time.perf_counter() - engine_began
        try:
            finished = await state.store_call(close_turn, state, turn)
        except Exception as e:
            logger.exception("could not store the turn (error id %s, conversation %s)", turn.placeholder.id,
                             turn.conversation_id)
            closed = True  # close_turn released the claim
            yield "error", _error_data(turn, e)
            return
        closed = True
        if failure is not None:
            yield "error", _error_data(turn, failure)
        else:
            yield "done", done_data(turn.placeholder.id, finished, response, timings(turn, engine_began, engine_s))
    finally:
        if not closed:
            with anyio.CancelScope(shield=True):
                await _settle(state, turn, response)


def _error_data(turn: OpenTurn, error: BaseException) -> Dict[str, Any]:
    """The ``error`` event: no internals, the error id (the assistant message's) the server log has it under."""
    return {"assistant_message_id": turn.placeholder.id, "status": "error",
            "error": error_body(500, "turn_failed", f"the answer failed (error id {turn.placeholder.id}; the server "
                                                    "log has the details)")["error"]}


async def _settle(state: ServeState, turn: OpenTurn, response: Any) -> None:
    """The consumer stopped: close the engine's stream (``cancelled`` with the text so far), write, release."""
    try:
        if response is not None:
            await response.aclose()
    finally:
        await state.store_call(close_turn, state, turn)


async def fold(events: AsyncGenerator[Event, None]) -> Tuple[Dict[str, Any], Optional[Dict[str, Any]]]:
    """A non-streamed turn: ``(every event's data merged in order, the error event's data or None)``; ``content``
    is the whole answer (the ``done`` event's, else the deltas joined)."""
    out: Dict[str, Any] = {}
    text: List[str] = []
    async for name, data in events:
        if name == "delta":
            text.append(data["text"])
        elif name == "error":
            return out, data
        else:
            out.update(data)
    out.setdefault("content", "".join(text))
    return out, None
