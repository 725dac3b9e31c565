"""OpenAI-compatible ``POST /v1/chat/completions`` (streaming and not) and ``GET /v1/models``.

A request maps to a conversation: ``conversation_id`` (extension field) continues one of yours; without it a new
conversation is made and the messages before the last user message seed its history (system messages dropped). The
last user message is the question. Ids, references and citations travel in the extension field ``convrag``.
"""

from __future__ import annotations

import time
from typing import Any, AsyncGenerator, AsyncIterator, Dict, Optional

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from llama_index_convrag.serve.access import check_question, owned_conversation
from llama_index_convrag.serve.auth import Caller, caller, current_user
from llama_index_convrag.serve.errors import APIError
from llama_index_convrag.serve.limits import arrived_at
from llama_index_convrag.serve.models import ChatCompletionRequest, text_of
from llama_index_convrag.serve.sse import SSE_HEADERS, EventStreamResponse, coalesced, data_frame
from llama_index_convrag.serve.state import ServeState
from llama_index_convrag.serve.turns import Event, fold, open_turn, turn_events
from llama_index_convrag.storage.conversation.base import Message, new_id

router = APIRouter(prefix="/v1", tags=["openai"])
SEED_ROLES = ("user", "assistant")
#: fields of the ``done`` event that the completion carries elsewhere (the message) or not at all
DONE_ONLY = frozenset({"content", "status", "trim_report"})


@router.get("/models")
def list_models(request: Request, user: str = Depends(current_user)) -> Dict[str, Any]:
    name = request.app.state.serve.model_name
    return {"object": "list", "data": [{"id": name, "object": "model", "created": 0,
                                        "owned_by": "llama-index-convrag"}]}


def _question_and_seed(body: ChatCompletionRequest) -> tuple:
    users = [i for i, m in enumerate(body.messages) if m.role == "user"]
    if not users:
        raise APIError(400, "no_question", "messages must hold a message with role 'user' (the question)",
                       "messages")
    last = users[-1]
    seed = [m for m in body.messages[:last] if m.role in SEED_ROLES]
    return text_of(body.messages[last].content), seed


def _prepare(state: ServeState, body: ChatCompletionRequest, who: Caller) -> tuple:
    user = who.user()
    question, seed = _question_and_seed(body)
    check_question(state, question)
    if body.conversation_id is not None:
        owned_conversation(state, body.conversation_id, user)
        return body.conversation_id, question
    info = state.store.create_conversation(user)
    if seed:
        state.store.add_messages([Message(id=new_id(), conversation_id=info.id, role=m.role,
                                          content=text_of(m.content)) for m in seed])
    return info.id, question


def _chunk(cid: str, model: str, delta: Dict[str, Any], finish: Optional[str],
           extra: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    out: Dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if extra is not None:
        out["convrag"] = extra
    return out


async def _stream(events: AsyncIterator[Event], model: str) -> AsyncGenerator[bytes, None]:
    cid = "chatcmpl-pending"
    ext: Dict[str, Any] = {}
    async for name, data in events:
        if name == "start":
            cid = f"chatcmpl-{data['assistant_message_id']}"
            ext.update(data)
            yield data_frame(_chunk(cid, model, {"role": "assistant", "content": ""}, None, dict(data)))
        elif name == "retrieval":
            ext.update(data)
        elif name == "delta":
            yield data_frame(_chunk(cid, model, {"content": data["text"]}, None))
        elif name == "done":
            ext["citations"] = data["citations"]
            yield data_frame(_chunk(cid, model, {}, "stop", ext))
        elif name == "error":
            chunk = _chunk(cid, model, {}, "error", ext)
            chunk["error"] = data["error"]
            yield data_frame(chunk)
    yield data_frame("[DONE]")


async def _complete(events: AsyncGenerator[Event, None], model: str) -> JSONResponse:
    out, error = await fold(events)
    if error is not None:
        return JSONResponse({"error": error["error"]}, status_code=500)
    ext = {k: v for k, v in out.items() if k not in DONE_ONLY}
    return JSONResponse({
        "id": f"chatcmpl-{ext.get('assistant_message_id')}", "object": "chat.completion", "created": int(time.time()),
        "model": model, "choices": [{"index": 0, "message": {"role": "assistant", "content": out["content"]},
                                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}, "convrag": ext})


@router.post("/chat/completions",
             responses={200: {"description": "chat.completion, or chat.completion.chunk events with stream=true"}})
async def chat_completions(body: ChatCompletionRequest, request: Request,
                           who: Caller = Depends(caller)) -> Response:
    state: ServeState = request.app.state.serve
    conversation_id, question = await state.store_call(_prepare, state, body, who)
    events = turn_events(state, await open_turn(state, conversation_id, question, began=arrived_at(request.scope)))
    if body.stream:
        running = coalesced(events, state.stream_window_s)  # the turn starts now, while the response is set up
        return EventStreamResponse(_stream(running, body.model), running, headers=SSE_HEADERS)
    return await _complete(events, body.model)
