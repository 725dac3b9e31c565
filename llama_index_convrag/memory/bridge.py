"""The vocabulary bridge: a recalled candidate that holds a word near a word of the query gains score.

A question often names a kind ("Which cities has John been to?") where the messages that answer it name instances
("It's Seattle", "I was in Chicago"); neither list of the hybrid search links the two. Each content word of the query
(:func:`query_words`: its words less the stop words of its language and the candidates' speakers' names) is
compared, as a single-word embedding of the memory's model, with each content word of a candidate
(:func:`unit_words`, read in the query's language); the candidate's
*bridged share* is the share of query words it holds a word within ``threshold`` cosine of (the same word counts),
and its score gains ``boost`` times that share (:func:`bridge_scores`). The step re-scores the candidate pool the
recall reads anyway: no search, and no model run for a word of the local model's vocabulary table
(:mod:`~llama_index_convrag.embeddings.word_table`) or one seen before (:class:`WordVectors`, warmed when messages are
indexed); the other words are embedded in one batch.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from functools import lru_cache
from typing import Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding

from llama_index_convrag.embeddings.word_table import WordTableSource, unit_rows
from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.memory.rules import RecallRules
from llama_index_convrag.text import identify, is_cjk, stop_words, words

#: Words cached by default: about the working vocabulary of English conversation (384 float32 each: ~30 MB).
DEFAULT_WORD_CACHE = 20_000
#: Languages whose Latin-script words are read with the English stop list (their own text has none between words).
CJK_LANGUAGES = ("zh", "ja", "ko")


def stops_of(language: str) -> FrozenSet[str]:
    """The stop words the bridge leaves out of a text in ``language`` (ISO 639-1, as
    :func:`~llama_index_convrag.text.identify` names it): the language's stop list (none for a language without
    one); for Chinese, Japanese and Korean the English list (their Latin words) and the Chinese one."""
    if language in CJK_LANGUAGES:
        return stop_words("en") | stop_words("zh")
    return stop_words(language)


@lru_cache(maxsize=16_384)
def _content_words(text: str, min_chars: int, language: str) -> Tuple[str, ...]:
    stops = stops_of(language)
    out: Dict[str, None] = {}
    for w in words(text):
        low = w.lower()
        if (len(low) >= min_chars or is_cjk(low[0])) and low.isalpha() and low not in stops:
            out[low] = None
    return tuple(out)


def unit_words(text: str, rules: RecallRules, language: str, exclude: Iterable[str] = ()) -> List[str]:
    """The distinct content words of ``text``, lower-cased, in first-seen order: alphabetic, at least
    ``rules.min_word_chars`` long (a CJK word at any length), neither a stop word of ``language``
    (:func:`stops_of`) nor a word of ``exclude`` (compared lower-cased)."""
    skip = {w.lower() for w in exclude}
    return [w for w in _content_words(text, rules.min_word_chars, language) if w not in skip]


def query_words(query: str, speakers: Iterable[str], rules: RecallRules, language: str) -> List[str]:
    """The query's content words (:func:`unit_words`) less the words of the ``speakers``' names and their plural or
    possessive forms ("Melanie's" is one word): a name already weighs in the searches and the speaker step."""
    names = {w.lower() for s in speakers for w in words(s)}
    return unit_words(query, rules, language, names | {n + "s" for n in names})


def text_words(text: str, rules: RecallRules) -> List[str]:
    """The content words of ``text`` (:func:`unit_words`) in the language identified for it: a query's words as its
    recall reads them, names included."""
    return unit_words(text, rules, identify(text))


def batch_words(texts: Sequence[str], rules: RecallRules) -> List[str]:
    """The distinct content words of ``texts`` (messages written together), in the language identified over all of
    them (one identification per batch)."""
    if not texts:
        return []
    language = identify("\n".join(texts))
    return list(dict.fromkeys(w for t in texts for w in unit_words(t, rules, language)))


def bridged_share(query_vectors: np.ndarray, vectors: np.ndarray, threshold: float) -> float:
    """The share of query words (rows of ``query_vectors``, unit length) that some row of ``vectors`` (a candidate's
    words, unit length) lies within ``threshold`` cosine of; 0.0 when either is empty."""
    if query_vectors.size == 0 or vectors.size == 0:
        return 0.0
    return float(((vectors @ query_vectors.T).max(axis=0) >= threshold).mean())


def bridge_scores(scores: Mapping[int, float], query: Sequence[str], candidates: Mapping[int, Sequence[str]],
                  vectors: Mapping[str, np.ndarray], rules: RecallRules) -> Dict[int, Dict[str, float]]:
    """Per position of ``scores``: ``{"score": score + rules.bridge_boost * share, "share": share}``, the share from
    :func:`bridged_share` (at ``rules.bridge_threshold``) of the ``query`` words (the first
    ``rules.max_query_words`` with a vector) against the position's ``candidates`` words (``vectors``: each word's
    unit-length embedding; a word without one is left out). Boost 0 or no query words: scores as given, share 0."""
    threshold, boost = rules.bridge_threshold, rules.bridge_boost
    out = {p: {"score": float(s), "share": 0.0} for p, s in scores.items()}
    q = [vectors[w] for w in query if w in vectors][:rules.max_query_words]
    if boost <= 0 or not q:
        return out
    vocab = list(dict.fromkeys(w for p in scores for w in candidates.get(p, ()) if w in vectors))
    if not vocab:
        return out
    near = (np.stack([vectors[w] for w in vocab]) @ np.stack(q).T) >= threshold  # one product for the pool
    # each word as a bit mask of the query words it lies near; a candidate's share: the bits its words cover
    bits = near.astype(np.int64) @ (np.int64(1) << np.arange(len(q), dtype=np.int64))
    mask = dict(zip(vocab, bits.tolist()))
    for p in scores:
        covered = 0
        for w in candidates.get(p, ()):
            covered |= mask.get(w, 0)
        share = bin(covered).count("1") / len(q)
        out[p] = {"score": float(scores[p]) + boost * share, "share": share}
    return out


class WordVectors:
    """Single-word embeddings of ``embed_model``, unit length: read from ``table`` (a
    :class:`~llama_index_convrag.embeddings.word_table.WordTableSource`: the model's vocabulary, made once per
    machine; None: no table) when it holds the word and is ready, else from a bounded LRU cache (the least recently
    used word is forgotten past ``max_words``). :meth:`lookup` embeds the words neither holds in one batch;
    :meth:`alookup` is its async twin. Thread-safe; nothing is embedded or read in ``__init__``."""

    def __init__(self, embed_model: BaseEmbedding, max_words: int = DEFAULT_WORD_CACHE,
                 table: Optional[WordTableSource] = None) -> None:
        if isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 1:
            raise ConfigurationError(f"max_words must be an int >= 1, got {max_words!r}")
        self._model = embed_model
        self._max = max_words
        self._table = table
        self._cache: "OrderedDict[str, np.ndarray]" = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._cache)

    def _split(self, wanted: Iterable[str]) -> Tuple[Dict[str, np.ndarray], List[str]]:
        found: Dict[str, np.ndarray] = {}
        missing: List[str] = []
        distinct = list(dict.fromkeys(wanted))
        # no words (the bridge is off): the table is not asked for, so it is not made
        table = self._table.get() if self._table is not None and distinct else None
        with self._lock:
            for w in distinct:
                if table is not None and w in table:
                    found[w] = table[w]
                    continue
                v = self._cache.get(w)
                if v is None:
                    missing.append(w)
                else:
                    self._cache.move_to_end(w)
                    found[w] = v
        return found, missing

    def _store(self, found: Dict[str, np.ndarray], missing: List[str], rows: Sequence[Sequence[float]]) -> None:
        with self._lock:
            for w, v in zip(missing, unit_rows(rows)):
                self._cache[w] = v
                found[w] = v
            while len(self._cache) > self._max:
                self._cache.popitem(last=False)

    def missing(self, wanted: Iterable[str]) -> List[str]:
        """The words of ``wanted`` that :meth:`lookup` would embed (neither the table nor the cache holds them)."""
        return self._split(wanted)[1]

    def lookup(self, wanted: Iterable[str]) -> Dict[str, np.ndarray]:
        """Each word of ``wanted`` with its vector (the missing ones embedded in one batch)."""
        found, missing = self._split(wanted)
        if missing:
            self._store(found, missing, self._model.get_text_embedding_batch(missing))
        return found

    async def alookup(self, wanted: Iterable[str]) -> Dict[str, np.ndarray]:
        """Async twin of :meth:`lookup`."""
        found, missing = self._split(wanted)
        if missing:
            self._store(found, missing, await self._model.aget_text_embedding_batch(missing))
        return found


def pool_words(query: str, texts: Mapping[int, str], speakers: Iterable[str],
               rules: RecallRules) -> Optional[Tuple[List[str], Dict[int, List[str]]]]:
    """``(query words, {position: words})`` for :func:`bridge_scores` over the candidates' ``texts``, both read with
    the stop words of the query's language (one identification, cached for a query the turn identified before), or
    None when the step is off (``rules.bridge_boost`` 0) or the query has no content word."""
    if rules.bridge_boost <= 0:
        return None
    language = identify(query)
    q = query_words(query, speakers, rules, language)
    if not q:
        return None
    return q, {p: unit_words(t, rules, language) for p, t in texts.items()}
