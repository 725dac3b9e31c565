"""What episodic memory indexes and hands back: one :class:`MemoryUnit` per message (an utterance), and a
:class:`Recall` (the recalled units, best first, each with its score and why it was found).

Pure: no Milvus, no model. :func:`own_text` and :func:`context_text` are the two texts each unit is indexed under.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Sequence

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.storage.conversation.base import in_history

#: The longest text a unit keeps (characters; Milvus VARCHAR fields hold at most 65,535 bytes).
MAX_UNIT_CHARS = 16_000


@dataclass(frozen=True)
class MemoryUnit:
    """One message of a conversation, as episodic memory indexes it.

    ``position`` orders the messages of a conversation (0-based, every message counts); ``turn`` is the chat turn it
    belongs to (a user message and its answer share one); ``speaker`` is the name shown in the indexed text ("user",
    "assistant", or a person's name); ``date`` is the label of the time shown (default: the UTC date of ``time``);
    ``session`` groups messages said together: the context of a unit is taken from its own session only."""

    owner: str
    conversation_id: str
    position: int
    message_id: str
    speaker: str
    text: str
    turn: int = 0
    time: float = 0.0
    date: str = ""
    session: str = ""

    def __post_init__(self) -> None:
        for name in ("owner", "conversation_id", "message_id", "speaker"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ConfigurationError(f"MemoryUnit.{name} must be a non-empty string, got {value!r}")
        if isinstance(self.position, bool) or not isinstance(self.position, int) or self.position < 0:
            raise ConfigurationError(f"MemoryUnit.position must be an int >= 0, got {self.position!r}")
        if not isinstance(self.text, str):
            raise ConfigurationError(f"MemoryUnit.text must be a string, got {type(self.text).__name__}")

    @property
    def unit_id(self) -> str:
        """The unit's primary key: one row per (conversation, position), so indexing again replaces it."""
        return unit_key(self.owner, self.conversation_id, self.position)

    @property
    def date_label(self) -> str:
        if self.date:
            return self.date
        if self.time > 0:
            return datetime.fromtimestamp(self.time, tz=timezone.utc).strftime("%d %B %Y")
        return ""

    def metadata(self) -> Dict[str, Any]:
        """What the row keeps beside its texts (returned with a recalled unit)."""
        return {"message_id": self.message_id, "speaker": self.speaker, "turn": self.turn, "time": self.time,
                "date": self.date_label, "session": self.session, "raw": self.text[:MAX_UNIT_CHARS]}


def units_of_messages(owner: str, conversation_id: str, messages: Sequence[Any]) -> List[MemoryUnit]:
    """One unit per message of a conversation's history (oldest first; anything with ``id``, ``role``, ``content``
    and ``created_at``, such as the store's ``Message``): position = its index, turn = the user messages before it
    (a user message and its answer share one), speaker = its role, date = the UTC date of ``created_at``."""
    out: List[MemoryUnit] = []
    turn = -1
    for position, m in enumerate(messages):
        if m.role == "user" or turn < 0:
            turn += 1
        out.append(MemoryUnit(owner=owner, conversation_id=conversation_id, position=position, message_id=m.id,
                              speaker=m.role, text=m.content, turn=turn, time=float(m.created_at)))
    return out


def units_of_conversation(owner: str, conversation_id: str, messages: Sequence[Any],
                          positions: Optional[Sequence[int]] = None) -> List[MemoryUnit]:
    """One unit per message of a stored conversation that is in its history (``storage``'s ``in_history``: not a
    failed, pending or superseded answer), at ``positions`` (None: all). ``messages`` is every stored message, oldest
    first (``ConversationStore.get_conversation``); a unit's position is the message's index there, which never
    changes (messages are only appended), so a regenerated answer or a failed one shifts no other unit. turn = the
    user messages before it."""
    wanted = None if positions is None else set(positions)
    out: List[MemoryUnit] = []
    turn = -1
    for position, m in enumerate(messages):
        if m.role == "user" or turn < 0:
            turn += 1
        if (wanted is None or position in wanted) and in_history(m):
            out.append(MemoryUnit(owner=owner, conversation_id=conversation_id, position=position, message_id=m.id,
                                  speaker=m.role, text=m.content, turn=turn, time=float(m.created_at)))
    return out


def unit_key(owner: str, conversation_id: str, position: int) -> str:
    """``<scope>:<position>``, the scope a digest of owner and conversation (two owners never share a row, and the
    key's length is bounded)."""
    scope = hashlib.blake2b(f"{owner}\x00{conversation_id}".encode("utf-8"), digest_size=12).hexdigest()
    return f"{scope}:{position}"


def _line(unit: MemoryUnit) -> str:
    return f"{unit.speaker}: {unit.text}"


def own_text(unit: MemoryUnit) -> str:
    """The unit alone, with its date and speaker (both are words a question may name)."""
    head = f"{unit.date_label}\n" if unit.date_label else ""
    return (head + _line(unit))[:MAX_UNIT_CHARS]


def context_text(unit: MemoryUnit, before: Sequence[MemoryUnit]) -> str:
    """The unit after the messages it follows in its session (``before``, oldest first): an answer is indexed with
    the question it answers, so a question that repeats the asker's words finds the answer too."""
    same = [b for b in before if b.session == unit.session and b.position < unit.position]
    head = f"{unit.date_label}\n" if unit.date_label else ""
    body = "\n".join(_line(b) for b in same) + ("\n" if same else "") + _line(unit)
    return (head + body)[-MAX_UNIT_CHARS:]


@dataclass
class RecalledUnit:
    """A recalled message: where it sits, what it said, its final score and why it was found (``found_by``: each
    search that ranked it, as ``{"search", "rank", "score"}``; ``spread_from``: the neighbouring positions whose
    scores it inherited; ``speaker_named``: True when the query named its speaker and its score was raised for
    it)."""

    position: int
    message_id: str
    speaker: str
    text: str
    date: str
    turn: int
    score: float
    found_by: List[Dict[str, Any]] = field(default_factory=list)
    spread_from: List[int] = field(default_factory=list)
    speaker_named: bool = False
    bridged: float = 0.0

    def to_dict(self) -> Dict[str, Any]:
        """Every field; the lists copied (a shallow copy of each ``found_by`` entry: they hold plain values)."""
        return {"position": self.position, "message_id": self.message_id, "speaker": self.speaker, "text": self.text,
                "date": self.date, "turn": self.turn, "score": self.score,
                "found_by": [dict(f) for f in self.found_by], "spread_from": list(self.spread_from),
                "speaker_named": self.speaker_named, "bridged": self.bridged}


@dataclass
class Recall:
    """What one recall returned: the units (best first), the window that was left out (positions ``>= before``),
    ``k``, and the time it took."""

    units: List[RecalledUnit]
    before: Optional[int]
    k: int
    latency_ms: float = 0.0

    @property
    def positions(self) -> List[int]:
        return [u.position for u in self.units]

    def block_text(self) -> str:
        """The memory block for the prompt: the recalled messages in conversation order, each with its date and
        position ("" when nothing was recalled)."""
        lines = []
        for u in sorted(self.units, key=lambda u: u.position):
            when = f" ({u.date})" if u.date else ""
            lines.append(f"[#{u.position}{when}] {u.speaker}: {u.text}")
        return "\n".join(lines)

    def to_record(self) -> Dict[str, Any]:
        """The turn record's view: which messages were recalled, why and at what score."""
        return {"before": self.before, "k": self.k, "latency_ms": round(self.latency_ms, 3),
                "units": [u.to_dict() for u in self.units]}


def row_speaker(row: Mapping[str, Any]) -> str:
    """The speaker a stored row keeps (:meth:`MemoryUnit.metadata`)."""
    return str((row.get("metadata") or {}).get("speaker", ""))


def row_raw(row: Mapping[str, Any]) -> str:
    """The message text a stored row keeps (:meth:`MemoryUnit.metadata`)."""
    return str((row.get("metadata") or {}).get("raw", ""))


def recalled_from_row(row: Mapping[str, Any], score: float, found_by: List[Dict[str, Any]],
                      spread_from: List[int], speaker_named: bool = False, bridged: float = 0.0) -> RecalledUnit:
    """A :class:`RecalledUnit` from a stored row (the fields :func:`row_of` wrote)."""
    meta = row.get("metadata") or {}
    return RecalledUnit(position=int(row["position"]), message_id=str(meta.get("message_id", "")),
                        speaker=row_speaker(row), text=row_raw(row),
                        date=str(meta.get("date", "")), turn=int(meta.get("turn", 0)), score=score,
                        found_by=found_by, spread_from=spread_from, speaker_named=speaker_named, bridged=bridged)
