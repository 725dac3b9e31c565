"""One served turn as a stream of ``(event, data)`` pairs, shared by the conversation API and the OpenAI endpoint.

``start`` comes from the store the moment the engine stores the placeholder (before retrieval); ``retrieval`` when
the engine hands back its stream; ``delta`` per piece of text; ``done`` or ``error`` last. When the consumer stops
(the client went away: the stream's task is cancelled) the engine's stream is closed, which finalises the message
``cancelled`` with the text so far; a placeholder stored before the engine returned its stream is finalised here.
The turn claim (one turn in flight per conversation) is released in every case.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, AsyncGenerator, Dict, List, Optional, Tuple

import anyio
from starlette.concurrency import run_in_threadpool

from llama_index_convrag.serve.errors import APIError, error_body
from llama_index_convrag.serve.models import citation_view
from llama_index_convrag.serve.state import ServeState
from llama_index_convrag.serve.turn_store import TurnStore
from llama_index_convrag.storage.conversation.base import Message

logger = logging.getLogger(__name__)
Event = Tuple[str, Dict[str, Any]]


async def claim(state: ServeState, conversation_id: str) -> None:
    """Claim the conversation for one turn, or 409 ``turn_in_flight``."""
    if not await run_in_threadpool(state.store.claim_turn, conversation_id, state.limits.turn_timeout_s):
        raise APIError(409, "turn_in_flight", f"conversation {conversation_id!r} is answering another turn; "
                                              "wait for its done/error event (or cancel it) and retry")


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


def done_data(state: ServeState, message_id: str, response: Any) -> Dict[str, Any]:
    stored = state.store.get_message(message_id)
    meta = getattr(response, "metadata", None) or {}
    trim = meta.get("trim_report")
    trim_view = trim.to_dict() if hasattr(trim, "to_dict") else trim if isinstance(trim, dict) else None
    return {"assistant_message_id": message_id, "status": stored.status if stored else "complete",
            "content": stored.content if stored else "",
            "citations": [citation_view(c) for c in state.store.get_citations(message_id)],
            "trim_report": trim_view}


async def turn_events(state: ServeState, conversation_id: str, question: str,
                      regenerate: Optional[Message] = None) -> AsyncGenerator[Event, None]:
    """Run one claimed turn (see the module docstring). The caller has claimed the conversation."""
    queue: "asyncio.Queue[Event]" = asyncio.Queue()
    began: Dict[str, Message] = {}

    def on_begin(user: Message, placeholder: Message) -> None:
        began["user"], began["placeholder"] = user, placeholder
        queue.put_nowait(("start", start_data(user, placeholder)))

    engine = state.engine_for(conversation_id, TurnStore(state.store, on_begin, regenerate))
    task = asyncio.ensure_future(engine.astream_chat(question))
    response: Any = None
    try:
        while response is None:
            getter = asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                yield getter.result()
            else:
                getter.cancel()
            if task in done:
                while not queue.empty():
                    yield queue.get_nowait()
                try:
                    response = task.result()
                except Exception as e:  # the engine stored the message as error (when it got that far)
                    logger.info("turn failed in %s: %s", conversation_id, e)
                    yield "error", _error_data(began, e)
                    return
        message_id = response.message_id
        yield "retrieval", retrieval_data(response)
        async for delta in response.async_response_gen():
            yield "delta", {"text": delta}
        if response.status == "error":
            yield "error", _error_data(began, RuntimeError("the answer stream failed"))
            return
        yield "done", await run_in_threadpool(done_data, state, message_id, response)
    except Exception as e:
        logger.exception("turn stream failed in %s", conversation_id)
        yield "error", _error_data(began, e)
    finally:
        with anyio.CancelScope(shield=True):
            await _settle(state, conversation_id, task, response, began)


def _error_data(began: Dict[str, Message], error: BaseException) -> Dict[str, Any]:
    placeholder = began.get("placeholder")
    return {"assistant_message_id": placeholder.id if placeholder else None, "status": "error",
            "error": error_body(500, "turn_failed", f"{type(error).__name__}: {error}")["error"]}


async def _settle(state: ServeState, conversation_id: str, task: "asyncio.Future[Any]", response: Any,
                  began: Dict[str, Message]) -> None:
    """Stop what still runs, finalise an unfinished placeholder ``cancelled``, release the claim."""
    try:
        if not task.done():
            task.cancel()
            try:
                await task
            except BaseException:  # noqa: BLE001 - cancelled on purpose
                pass
        if task.done() and not task.cancelled() and task.exception() is None and response is None:
            response = task.result()
        if response is not None:
            await response.aclose()  # an unfinished stream becomes 'cancelled' with its partial text
        placeholder = began.get("placeholder")
        if placeholder is not None:
            stored = await run_in_threadpool(state.store.get_message, placeholder.id)
            if stored is not None and stored.status == "pending":
                await run_in_threadpool(state.store.finalize_message, placeholder.id, content=stored.content,
                                        status="cancelled")
    finally:
        await run_in_threadpool(state.store.release_turn, conversation_id)
