"""Ownership checks: another user's conversation or message reads exactly as an unknown id (404)."""

from __future__ import annotations

from llama_index_convrag.serve.errors import APIError, not_found
from llama_index_convrag.serve.state import ServeState
from llama_index_convrag.storage.conversation.accounts import ConversationInfo
from llama_index_convrag.storage.conversation.base import Message


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
