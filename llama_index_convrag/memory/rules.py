"""How episodic recall ranks earlier messages, as one typed value (:class:`RecallRules`) and pure functions.

A recall searches four lists at once (one hybrid search, client-side normalised weighted fusion): the dense and the
BM25 field of each message's own text, and of its text after the message it answers (:func:`~.units.context_text`).
Then each message inherits part of its neighbours' scores (:func:`spread_scores`): in a conversation the words of a
question are often in the message before its answer ("What did you research?" / "Adoption agencies."), the answer in
the one after, and a speaker goes on about what they said in their next message (two positions on). The best ``k``
outside the recent window are kept (:func:`select`), after two re-scoring steps over the best ``pool(k)``: the named
speaker (:func:`named_speaker`, :func:`boost_speaker`) and the vocabulary bridge
(:mod:`~llama_index_convrag.memory.bridge`).

Each default below names the measurement that chose it: a grid over the weights and spreads on LoCoMo conversations
0-2 (recall@10 of the evidence utterances, flat between 0.77 and 0.79 for the best dozen settings), confirmed on
conversations 3-4 with ``bench/memory_recall.py`` (docs/results/memory.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.text import holds_phrase


#: Width of the bridge's per-word bit mask (one bit per query word; an int64 keeps its sign bit).
MASK_BITS = 62


@dataclass(frozen=True)
class RecallRules:
    """Every tunable of episodic recall. Checked once, here."""

    context_before: int = 1
    """Earlier messages of the same session indexed with a message (its context text); 0 indexes own texts only
    (the context lists then repeat them). 1: the context lists lift recall@10 on LoCoMo by about 0.09."""
    context_weight: float = 0.5
    """Share of the fusion given to the context lists (the rest to the own-text lists). 0.5: the own and context
    lists together beat either alone; 0.7 ties on conversations 0-2 and loses on 3-4."""
    dense_weight: float = 0.4
    """Share of each pair given to the dense list (the rest to BM25). 0.4: conversation messages are short and
    their exact words (names, objects) carry the match; 0.5 and 0.6 recalled less."""
    forward_spread: float = 0.5
    """A message gains this share of the fused score of the message before it (the answer after a matching
    question). 0.5: recall@10 about +0.06 over no spreading; 0.3 and 0.7 less."""
    backward_spread: float = 0.5
    """A message gains this share of the fused score of the message after it. 0.5: in each of the five best
    settings on conversations 0-2 (0.1 and 0.3 less)."""
    second_spread: float = 0.4
    """A message gains this share of the fused score of the message two before it (in a dialogue, its speaker's
    previous message: they go on about what matched); 0 turns it off. 0.4: recall@10 on LoCoMo 0.819 against 0.811
    (tune 0.836 / 0.831, check 0.803 / 0.791; multi-hop 0.489 / 0.485 and 0.456 / 0.451); 0.3 recalled 0.819 with
    multi-hop lower on tune, two after or both ways at 0.2-0.5 lowered multi-hop on tune (0.458-0.478), three apart
    recalled 0.808-0.812 (``bench/recall_multihop_study.py``)."""
    depth: int = 50
    """Candidates each searched list returns before fusion and spreading (each list is min-max normalised over
    them). 50: recall@10 on LoCoMo 0.795 against 0.785 at 100, higher on both halves (0.811 / 0.779 against
    0.797 / 0.774); multi-hop even (0.441 against 0.442)."""
    speaker_boost: float = 0.4
    """A query that names exactly one speaker of the candidates multiplies that speaker's candidates' scores by
    1 + this; 0 turns it off. 0.4: recall@10 on LoCoMo 0.795 against 0.781 without (higher on both halves),
    multi-hop 0.441 against 0.388; 0.2 and 0.6 recalled 0.790 and 0.793."""
    speaker_pool: int = 3
    """Candidates read for the speaker and bridge steps, as a multiple of ``k`` (their rows are fetched anyway, in
    one ``get``).
    3: pools of 2.5k and 6k recalled the same at k=10 (a scratch study over the same lists)."""
    bridge_boost: float = 0.4
    """A candidate's score gains this times its bridged share (the share of the query's content words it holds a
    word near: :mod:`~llama_index_convrag.memory.bridge`); 0 turns the step off. 0.4: recall@10 on LoCoMo 0.811
    against 0.792 without (tune 0.831 / 0.809, check 0.791 / 0.776; multi-hop 0.468 / 0.440); 0.2 recalled 0.801,
    0.6 and 0.8 0.810 (a scratch study over the same candidates)."""
    bridge_threshold: float = 0.5
    """Cosine of two single-word embeddings from which the bridge counts them as near. 0.5: on the plateau of LoCoMo
    conversations 0-2 (recall@10 0.831-0.833 at 0.45-0.5, 0.818-0.825 at 0.55-0.7, boost 0.4); on conversations 3-4
    every setting from 0.45 to 0.7 recalled 0.783-0.792."""

    min_word_chars: int = 3
    """The shortest word the bridge compares (a CJK word compares at any length). 3: recall@10 on LoCoMo 0.811
    (tune 0.831 / check 0.791) against 0.810 at 2, 0.812 at 4 (check 0.793) and 0.804 at 5; 3 keeps short nouns
    ("dog", "art") (``bench/recall_rescore_study.py --studies words``)."""
    max_query_words: int = 62
    """Query words the bridge compares at most (the first ones; each is one bit of a 64-bit mask per candidate word,
    so 62 at most). 62: every LoCoMo question fits whole (the longest holds 13 content words, the mean 4.1:
    ``bench/recall_rescore_study.py --studies words``)."""

    def __post_init__(self) -> None:
        for name in ("context_weight", "dense_weight", "bridge_threshold"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ConfigurationError(f"RecallRules.{name} must be a number in [0, 1], got {value!r}")
        for name in ("forward_spread", "backward_spread", "second_spread", "speaker_boost", "bridge_boost"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 2.0:
                raise ConfigurationError(f"RecallRules.{name} must be a number in [0, 2], got {value!r}")
        for name, low in (("context_before", 0), ("depth", 1), ("speaker_pool", 1), ("min_word_chars", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigurationError(f"RecallRules.{name} must be an int >= {low}, got {value!r}")
        value = self.max_query_words
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MASK_BITS:
            raise ConfigurationError(f"RecallRules.max_query_words must be an int in [1, {MASK_BITS}] (the bridge's "
                                     f"bit mask), got {value!r}")

    def pool(self, k: int) -> int:
        """Candidates to keep before the speaker and bridge steps (``k`` when both are off)."""
        return k * self.speaker_pool if self.speaker_boost > 0 or self.bridge_boost > 0 else k

    def weights(self) -> Tuple[float, float, float, float]:
        """Fusion weights of (own dense, own BM25, context dense, context BM25)."""
        own, ctx, d = 1.0 - self.context_weight, self.context_weight, self.dense_weight
        return own * d, own * (1.0 - d), ctx * d, ctx * (1.0 - d)


Spread = Dict[int, Tuple[float, List[int]]]


def spread_scores(fused: Mapping[int, float], rules: RecallRules, before: Optional[int] = None) -> Spread:
    """Per position (the fused candidates and their neighbours, those ``< before`` when given): the score after
    spreading (from the message before, the one after, and the one two before), and the positions it inherited
    from, in that order."""
    out: Spread = {}
    wanted = set(fused)
    if rules.forward_spread > 0:
        wanted |= {p + 1 for p in fused}
    if rules.backward_spread > 0:
        wanted |= {p - 1 for p in fused if p > 0}
    if rules.second_spread > 0:
        wanted |= {p + 2 for p in fused}
    for p in wanted:
        if before is not None and p >= before:
            continue
        score = fused.get(p, 0.0)
        came: List[int] = []
        prev, nxt = fused.get(p - 1, 0.0), fused.get(p + 1, 0.0)
        if rules.forward_spread > 0 and prev > 0:
            score += rules.forward_spread * prev
            came.append(p - 1)
        if rules.backward_spread > 0 and nxt > 0:
            score += rules.backward_spread * nxt
            came.append(p + 1)
        second = fused.get(p - 2, 0.0)
        if rules.second_spread > 0 and second > 0:
            score += rules.second_spread * second
            came.append(p - 2)
        out[p] = (score, came)
    return out


def select(spread: Spread, k: int) -> List[int]:
    """The ``k`` best positions, best first (ties: the later message first, the fresher memory)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigurationError(f"k must be an int >= 1, got {k!r}")
    return [p for p in best({p: score for p, (score, _) in spread.items()}, k) if spread[p][0] > 0]


def named_speaker(query: str, speakers: Iterable[str]) -> Optional[str]:
    """The one speaker among ``speakers`` that ``query`` names (as words, any case: "john" names "John", "Johnny"
    does not); None when it names none or several."""
    named = {s for s in speakers if s and holds_phrase(query, s)}
    return named.pop() if len(named) == 1 else None


def boost_speaker(scores: Mapping[int, float], speakers: Mapping[int, str], named: Optional[str],
                  boost: float) -> Dict[int, float]:
    """Each position's score, times ``1 + boost`` where ``named`` said it (unchanged when ``named`` is None)."""
    if named is None or boost <= 0:
        return dict(scores)
    return {p: s * (1.0 + boost) if speakers.get(p) == named else s for p, s in scores.items()}


def best(scores: Mapping[int, float], k: int) -> List[int]:
    """The ``k`` best positions of ``scores``, best first (ties: the later message first)."""
    return [p for p, _ in sorted(scores.items(), key=lambda item: (-item[1], -item[0]))[:k]]
