"""OpenAI-compatible ``POST /v1/chat/completions`` (streaming and not), ``GET /v1/models`` and ``GET
/v1/models/{model}``.

A model is a knowledge base: ``convrag`` answers from the server's own, ``convrag/<name>`` from the base of that
name (one you may read); any other model answers 404 ``model_not_found`` in OpenAI's shape. A request maps to a
conversation: ``conversation_id`` (extension field) continues one of yours (its own base answers; ``model`` must be
``convrag`` or that base's id); without it a new conversation is made on the model's base, titled from the question,
and the messages before the last user message seed its history (system messages dropped). The last user message is
the question. ``usage`` counts tokens with the engine's counter (``cl100k_base``). Ids, references and citations
travel in the extension field ``convrag``.
"""

from __future__ import annotations

import time
from typing import Any, AsyncIterator, Dict, Optional, Tuple

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from llama_index_convrag.config.tokens import count_tokens
from llama_index_convrag.serve.access import (check_question, conversation_kb, owned_conversation, readable_kb,
                                              title_from)
from llama_index_convrag.serve.conversations import names_of
from llama_index_convrag.serve.deps import KeyCaller, TurnCaller, require
from llama_index_convrag.serve.errors import APIError
from llama_index_convrag.serve.events import Entry, TurnLog
from llama_index_convrag.serve.knowledge import MODEL_PREFIX, model_id, visible
from llama_index_convrag.serve.limits import arrived_at
from llama_index_convrag.serve.models import (ChatCompletionOut, ChatCompletionRequest, ModelList, ModelOut, doc,
                                              text_of)
from llama_index_convrag.serve.sse import TurnStream, unnamed
from llama_index_convrag.serve.state import ServeState
from llama_index_convrag.serve.turns import fold, open_turn, turn_events
from llama_index_convrag.storage.conversation.accounts import Principal
from llama_index_convrag.storage.conversation.base import Message, new_id
from llama_index_convrag.storage.conversation.knowledge import KnowledgeBase

router = APIRouter(prefix="/v1", tags=["openai"])
SEED_ROLES = ("user", "assistant")
#: fields of the ``done`` event that the completion carries elsewhere (the message) or not at all
DONE_ONLY = frozenset({"content", "status", "trim_report", "timings"})
OWNED_BY = "llama-index-convrag"


def _model(model: str) -> Dict[str, Any]:
    return {"id": model, "object": "model", "created": 0, "owned_by": OWNED_BY}


def model_not_found(model: str, state: ServeState, principal: Principal) -> APIError:
    """OpenAI's answer for an unknown model (404, type ``invalid_request_error``, code ``model_not_found``), naming
    the models this caller may use."""
    known = [kb["model"] for kb in visible(state, principal)]
    return APIError(404, "model_not_found", f"The model {model!r} does not exist or you do not have access to it; "
                                            f"yours: {known}", "model", type="invalid_request_error")


def kb_of_model(state: ServeState, model: str, principal: Principal) -> KnowledgeBase:
    """The knowledge base a model id names (404 ``model_not_found`` unless the caller may read it)."""
    if model == state.model_name:
        kb_id = None
    elif model.startswith(MODEL_PREFIX + "/"):
        found = state.store.knowledge_base_named(model[len(MODEL_PREFIX) + 1:])
        if found is None:
            raise model_not_found(model, state, principal)
        kb_id = found.id
    else:
        raise model_not_found(model, state, principal)
    try:
        return readable_kb(state, kb_id, principal)[0]
    except APIError as e:
        raise model_not_found(model, state, principal) from e


def _models(state: ServeState, who: Any) -> Dict[str, Any]:
    principal = require(who.principal(), "chat")
    return {"object": "list", "data": [_model(kb["model"]) for kb in visible(state, principal)]}


@router.get("/models", responses=doc(ModelList, 403))
async def list_models(who: KeyCaller) -> Dict[str, Any]:
    state = who.state
    return await state.store_call(_models, state, who)


@router.get("/models/{model:path}", responses=doc(ModelOut, 403, 404))
async def get_model(model: str, who: KeyCaller) -> Dict[str, Any]:
    state = who.state

    def find() -> Dict[str, Any]:
        principal = require(who.principal(), "chat")
        return _model(model_id(state, kb_of_model(state, model, principal)))

    return await state.store_call(find)


def _question_and_seed(body: ChatCompletionRequest) -> tuple:
    users = [i for i, m in enumerate(body.messages) if m.role == "user"]
    if not users:
        raise APIError(400, "no_question", "messages must hold a message with role 'user' (the question)",
                       "messages")
    last = users[-1]
    seed = [m for m in body.messages[:last] if m.role in SEED_ROLES]
    return text_of(body.messages[last].content), seed


def _prepare(state: ServeState, body: ChatCompletionRequest, who: Any) -> Tuple[str, str, KnowledgeBase, str]:
    """``(conversation id, question, knowledge base, the caller's id)``; a new conversation made and seeded when no
    ``conversation_id`` is given."""
    principal = require(who.principal(), "chat")
    question, seed = _question_and_seed(body)
    check_question(state, question)
    if body.conversation_id is not None:
        info = owned_conversation(state, body.conversation_id, principal.user_id)
        kb = conversation_kb(state, info, principal)
        if body.model not in (state.model_name, model_id(state, kb)):
            kb_of_model(state, body.model, principal)  # an unknown model: 404 model_not_found
            raise APIError(400, "model_mismatch", f"conversation {body.conversation_id!r} answers from model "
                                                  f"{model_id(state, kb)!r}; send that or {state.model_name!r}",
                           "model")
        return body.conversation_id, question, kb, principal.user_id
    kb = kb_of_model(state, body.model, principal)
    info = state.store.create_conversation(principal.user_id, title_from(question), kb_id=kb.id)
    if seed:
        state.store.add_messages([Message(id=new_id(), conversation_id=info.id, role=m.role,
                                          content=text_of(m.content)) for m in seed])
        if state.memory is not None:  # the seeded messages, for recall and the summary (queued, off the turn)
            state.memory.schedule_backfill(principal.user_id, info.id)
    return info.id, question, kb, principal.user_id


def usage(question: str, done: Dict[str, Any], references: Any = ()) -> Dict[str, int]:
    """Tokens of the turn (``cl100k_base``, the engine's counter): the prompt as the budget counted it (its total:
    system, history, passages, question), else the question and the passages; the answer's."""
    trim = done.get("trim_report")
    if isinstance(trim, dict) and isinstance(trim.get("total"), int):
        prompt = trim["total"]
    else:
        prompt = count_tokens(question) + sum(count_tokens(r.get("text") or "") for r in references or ())
    completion = count_tokens(done.get("content") or "")
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _chunk(cid: str, model: str, delta: Dict[str, Any], finish: Optional[str],
           extra: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    out: Dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if extra is not None:
        out["convrag"] = extra
    return out


class _Chunks:
    """A turn's events as ``chat.completion.chunk`` frames; the usage chunk and ``[DONE]`` after the last."""

    def __init__(self, model: str, question: str, include_usage: bool) -> None:
        self.model, self.question, self.include_usage = model, question, include_usage
        self.cid = "chatcmpl-pending"
        self.ext: Dict[str, Any] = {}
        self.usage: Optional[Dict[str, int]] = None

    def __call__(self, entry: Entry) -> Optional[bytes]:
        _, name, data = entry
        if name == "start":
            self.cid = f"chatcmpl-{data['assistant_message_id']}"
            self.ext.update(data)
            return unnamed(_chunk(self.cid, self.model, {"role": "assistant", "content": ""}, None, dict(data)))
        if name == "retrieval":
            self.ext.update(data)
            return None
        if name == "delta":
            return unnamed(_chunk(self.cid, self.model, {"content": data["text"]}, None))
        if name == "done":
            self.ext["citations"] = data["citations"]
            self.usage = usage(self.question, data, self.ext.get("references"))
            return unnamed(_chunk(self.cid, self.model, {}, "stop", self.ext))
        if name == "error":
            chunk = _chunk(self.cid, self.model, {}, "error", self.ext)
            chunk["error"] = data["error"]
            return unnamed(chunk)
        return None

    async def tail(self) -> AsyncIterator[bytes]:
        if self.include_usage and self.usage is not None:
            yield unnamed({"id": self.cid, "object": "chat.completion.chunk", "created": int(time.time()),
                           "model": self.model, "choices": [], "usage": self.usage})
        yield unnamed("[DONE]")


async def _complete(events: AsyncIterator[Any], model: str, question: str) -> JSONResponse:
    out, error = await fold(events)  # type: ignore[arg-type]
    if error is not None:
        return JSONResponse({"error": error["error"]}, status_code=500)
    ext = {k: v for k, v in out.items() if k not in DONE_ONLY}
    return JSONResponse({
        "id": f"chatcmpl-{ext.get('assistant_message_id')}", "object": "chat.completion", "created": int(time.time()),
        "model": model, "choices": [{"index": 0, "message": {"role": "assistant", "content": out["content"]},
                                     "finish_reason": "stop"}],
        "usage": usage(question, out, out.get("references")), "convrag": ext})


@router.post("/chat/completions", responses=doc(ChatCompletionOut, 400, 403, 404, 409, description=(
    "chat.completion, or chat.completion.chunk events with stream=true")))
async def chat_completions(body: ChatCompletionRequest, request: Request, who: TurnCaller) -> Response:
    state = who.state
    conversation_id, question, kb, owner = await state.store_call(_prepare, state, body, who)
    await state.prepare_engine(kb)  # the first turn on a knowledge base builds its engine
    turn = await open_turn(state, conversation_id, question, began=arrived_at(request.scope), knowledge_base=kb,
                           owner=owner)
    events = turn_events(state, turn, names_of(state, kb))
    if body.stream:  # the turn starts now, while the response is set up; a client that leaves cancels it
        log = state.logs.add(turn.placeholder.id, await TurnLog.begin(events, state.stream_window_s, grace_s=0))
        chunks = _Chunks(body.model, question, body.stream_options is not None and body.stream_options.include_usage)
        return TurnStream(log.reader(), render=chunks, tail=chunks.tail, ping_s=state.limits.ping_s)
    return await _complete(events, body.model, question)
