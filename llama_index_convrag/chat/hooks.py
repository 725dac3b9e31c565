"""``AnswerHook``: the chat engine's one extension point around an answer.

A hook wraps the answer step of every turn (``scope``: a context manager entered with the turn's assistant message id,
so events raised while answering can carry it) and then names the turn-record fields the answer sets
(``record_fields``). The judge plugs in this way (:class:`~llama_index_convrag.judge.options.JudgeHook`); so can a
user's own step (tracing, a grounding check), through ``AnswerOptions(hooks=[...])``.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import Any, Dict, Iterator, Protocol, Sequence, runtime_checkable


@runtime_checkable
class AnswerHook(Protocol):
    """Runs around one turn's answer."""

    def scope(self, assistant_message_id: str) -> AbstractContextManager:
        """Entered before the answer is synthesized, left after (streamed answers: once the response is made)."""

    def record_fields(self, response: Any) -> Dict[str, Any]:
        """Turn-record fields to set from the response (``{}``: none)."""


@contextmanager
def hooks_scope(hooks: Sequence[AnswerHook], assistant_message_id: str) -> Iterator[None]:
    """Every hook's scope, entered in order and left in reverse."""
    with ExitStack() as stack:
        for hook in hooks:
            stack.enter_context(hook.scope(assistant_message_id))
        yield
