"""Who may see and do what: another user's conversation or message, and a knowledge base one has no role in, read
exactly as an unknown id (404); a knowledge base one may read but not change answers 403 ``insufficient_role``.
Every function here is a blocking store read (call it inside a store call)."""

from __future__ import annotations

from typing import Optional, Tuple

from llama_index_convrag.serve.errors import APIError, forbidden, not_found
from llama_index_convrag.serve.state import ServeState
from llama_index_convrag.storage.conversation.accounts import ConversationInfo, Principal
from llama_index_convrag.storage.conversation.base import Message
from llama_index_convrag.storage.conversation.knowledge import KB_ROLES, KnowledgeBase, at_least


def owned_conversation(state: ServeState, conversation_id: str, user: str) -> ConversationInfo:
    info = state.store.conversation_info(conversation_id, owner=user)
    if info is None:
        raise not_found("conversation", conversation_id)
    return info


def owned_message(state: ServeState, message_id: str, user: str) -> Message:
    message = state.store.get_message(message_id)
    if message is None or state.store.conversation_info(message.conversation_id, owner=user) is None:
        raise not_found("message", message_id)
    return message


def readable_kb(state: ServeState, kb_id: Optional[str], principal: Principal) -> Tuple[KnowledgeBase, str]:
    """The knowledge base (None: the server's) and the principal's role in it; 404 when it does not exist or they
    have no role in it."""
    if kb_id is None:
        if state.default_kb is None:
            raise not_found("knowledge base", "(the server's default)")
        kb_id = state.default_kb.id
    kb, role = state.store.knowledge_base_with_role(kb_id, principal.user_id)
    if kb is not None and principal.can("admin"):
        role = "owner"
    if kb is None or role is None:
        raise not_found("knowledge base", kb_id)
    return kb, role


def kb_for(state: ServeState, kb_id: str, principal: Principal, needed: str) -> KnowledgeBase:
    """The knowledge base when the principal's role is ``needed`` or stronger; 404 as :func:`readable_kb`, 403
    ``insufficient_role`` naming the role needed and the one held."""
    kb, role = readable_kb(state, kb_id, principal)
    if not at_least(role, needed):
        stronger = [r for r in KB_ROLES if at_least(r, needed)]
        raise forbidden("insufficient_role", f"this needs the role {' or '.join(stronger)} in knowledge base "
                                             f"{kb.name!r}; yours is {role}")
    return kb


def conversation_kb(state: ServeState, info: ConversationInfo, principal: Principal) -> KnowledgeBase:
    """The knowledge base a conversation answers from, when its owner may still read it (else 404)."""
    return readable_kb(state, info.kb_id, principal)[0]


def check_question(state: ServeState, question: str) -> str:
    """The question, or 400 naming the limit (too long) or the problem (empty)."""
    limit = state.limits.max_question_chars
    if len(question) > limit:
        raise APIError(400, "question_too_long", f"the question has {len(question)} characters; the limit is "
                                                 f"{limit} (max_question_chars)", "content")
    if not question.strip():
        raise APIError(400, "no_question", "the question is empty", "content")
    return question


def check_page(state: ServeState, limit: int) -> int:
    if not 1 <= limit <= state.limits.max_page_size:
        raise APIError(400, "page_size", f"limit must be between 1 and {state.limits.max_page_size} "
                                         f"(max_page_size), got {limit}", "limit")
    return limit


def title_from(question: str, limit: int = 80) -> str:
    """A conversation's title from its first question: the question's first line, cut at a word within ``limit``
    characters (with an ellipsis)."""
    line = " ".join(question.strip().split("\n", 1)[0].split())
    if len(line) <= limit:
        return line
    cut = line[:limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,.;:") + "…"
