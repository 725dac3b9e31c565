"""``EpisodicMemory``: every committed message indexed for its conversation, and recall of the best earlier ones.

:meth:`EpisodicMemory.index` writes messages (one batched upsert; the context of each comes from the messages given
before it, in the batch or in ``context``); :meth:`EpisodicMemory.recall` runs two searches of the turn's
retrieval query (dense and BM25, each over the own-text and the context rows: :mod:`.episodic_search`) over the
owner's conversation, leaving out the recent window (positions ``>= before``), fuses the four lists, spreads
scores to neighbouring messages and returns the best ``k`` (:mod:`~llama_index_convrag.memory.rules`) with their
positions, dates, scores and the searches that found them. Every search and delete is filtered by owner and
conversation, so nothing crosses users or conversations. ``aindex`` / ``arecall`` / ``adelete_conversation`` are the
async twins (they share the pure helpers). Nothing connects or creates in ``__init__``: the collection is created by
:meth:`ensure_collection` or on the first write.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import QueryBundle
from pymilvus import MilvusClient

from llama_index_convrag._beside import LazyThreads, arun_beside, run_beside
from llama_index_convrag.embeddings.word_table import word_table_source
from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.milvus.calls import LoopClients, MilvusCall, MilvusSteps, adrive, drive
from llama_index_convrag.milvus.client import MilvusTarget
from llama_index_convrag.milvus.schema import open_client
from llama_index_convrag.memory.episodic_schema import (
    CONTEXT,
    CONTEXT_SUFFIX,
    DEFAULT_COLLECTION,
    DENSE_FIELD,
    OLD,
    OUTPUT_FIELDS,
    OWN,
    create_episodic_collection,
    layout_of,
)
from llama_index_convrag.memory.episodic_rows import DEFAULT_CACHED_ROWS, RowCache, unit_row
from llama_index_convrag.memory.episodic_search import (
    owned,
    rank,
    scope_expr,
    search_calls,
    search_expr,
)
from llama_index_convrag.memory.bridge import WordVectors, batch_words, bridge_scores, pool_words, text_words
from llama_index_convrag.memory.rules import RecallRules, best, boost_speaker, named_speaker, select, spread_scores
from llama_index_convrag.memory.units import (
    MemoryUnit,
    Recall,
    RecalledUnit,
    context_text,
    own_text,
    recalled_from_row,
    row_raw,
    row_speaker,
    unit_key,
    units_of_conversation,
    units_of_messages,
)
from llama_index_convrag.storage.conversation.base import in_history
from llama_index_convrag.retrievers.ranking import Ranking

logger = logging.getLogger(__name__)
Query = Union[str, QueryBundle]
INSERT_BATCH = 256
#: Conversations remembered as holding indexed messages (their recall skips the count query); the oldest is forgotten
#: past this many.
KNOWN_MAX = 65_536
#: Worker threads that embed recall queries' words while the searches run (one per recall at a time).
WORD_THREADS = 4


def unit_texts(units: Sequence[MemoryUnit], context: Sequence[MemoryUnit],
               rules: RecallRules) -> List[Tuple[MemoryUnit, str, str]]:
    """Each unit (by position) with its own text and its context text (up to ``rules.context_before`` messages
    before it, from ``context`` and the batch itself)."""
    ordered = sorted(units, key=lambda u: u.position)
    pool = sorted(list(context) + ordered, key=lambda u: u.position)
    at = {u.position: i for i, u in enumerate(pool)}
    out = []
    for u in ordered:
        i = at[u.position]
        before = pool[max(0, i - rules.context_before):i] if rules.context_before else []
        out.append((u, own_text(u), context_text(u, before)))
    return out


def rows_of(texts: Sequence[Tuple[MemoryUnit, str, str]], vectors: Sequence[Sequence[float]]) -> List[Dict[str, Any]]:
    """Milvus rows, two per unit (its own text and its context text, :mod:`.episodic_schema`); ``vectors`` holds the
    own and the context vector of each unit, in turn."""
    rows = []
    for n, (u, own, ctx) in enumerate(texts):
        common = {"doc_id": u.conversation_id, "owner": u.owner, "conversation_id": u.conversation_id,
                  "position": u.position, "metadata": u.metadata()}
        rows.append({"id": u.unit_id, "kind": OWN, "text": own, DENSE_FIELD: list(vectors[2 * n]), **common})
        rows.append({"id": u.unit_id + CONTEXT_SUFFIX, "kind": CONTEXT, "text": ctx,
                     DENSE_FIELD: list(vectors[2 * n + 1]), **common})
    return rows


def row_ids(owner: str, conversation_id: str, positions: Iterable[int]) -> List[str]:
    """The ids of both rows of each position."""
    return [key + suffix for p in positions for key in [unit_key(owner, conversation_id, p)]
            for suffix in ("", CONTEXT_SUFFIX)]


def history_before(messages: Sequence[Any], position: int, n: int) -> List[int]:
    """The positions of the last ``n`` history messages before ``position`` (read backwards: the cost follows
    ``n``, not the conversation)."""
    out: List[int] = []
    for p in range(min(position, len(messages)) - 1, -1, -1):
        if len(out) >= n:
            break
        if in_history(messages[p]):
            out.append(p)
    return out[::-1]


def _position(key: str) -> int:
    return int(key.rsplit(":", 1)[-1])


def plan_recall(ranking: Ranking, rules: RecallRules, before: Optional[int],
                k: int) -> Tuple[List[int], Dict[int, Tuple[float, List[int]]], Dict[int, List[Dict[str, Any]]]]:
    """The candidate positions (best first: ``rules.pool(k)`` of them, for the speaker step), every position's
    spread score, and the searches that ranked each candidate."""
    fused = {_position(key): score for key, score in ranking.kept}
    spread = spread_scores(fused, rules, before)
    pool = select(spread, rules.pool(k))
    found_by: Dict[int, List[Dict[str, Any]]] = {p: [] for p in pool}
    for key, _ in ranking.kept:
        p = _position(key)
        if p in found_by:
            found_by[p] = [{"search": stage, "rank": rank, "score": round(score, 6)}
                           for stage, rank, score in ranking.trail(key)]
    return pool, spread, found_by


def query_text(query: Query) -> str:
    return query.query_str if isinstance(query, QueryBundle) else query


Bridge = Optional[Tuple[List[str], Dict[int, List[str]]]]


def bridge_words(rows: Sequence[Mapping[str, Any]], query: str, rules: RecallRules) -> Bridge:
    """The words the bridge step compares (:func:`~.bridge.pool_words` over the candidates' rows), or None when it
    is off or the query has no content word."""
    texts = {int(r["position"]): row_raw(r) for r in rows}
    return pool_words(query, texts, {row_speaker(r) for r in rows}, rules)


def wanted_words(bridge: Bridge) -> List[str]:
    """Every word whose vector the bridge step reads."""
    if bridge is None:
        return []
    q, per = bridge
    return list(dict.fromkeys([*q, *(w for ws in per.values() for w in ws)]))


def finish_recall(pool: List[int], spread: Mapping[int, Tuple[float, List[int]]],
                  found_by: Mapping[int, List[Dict[str, Any]]], rows: Sequence[Mapping[str, Any]], query: str,
                  rules: RecallRules, before: Optional[int], k: int, started: float, bridge: Bridge = None,
                  vectors: Optional[Mapping[str, Any]] = None) -> Recall:
    """The :class:`Recall` of the best ``k`` candidates whose rows exist (a neighbour never indexed is skipped),
    after the speaker step (:func:`~.rules.named_speaker`) over the candidates' speakers and the bridge step
    (:func:`~.bridge.bridge_scores`, when ``bridge`` holds its words and ``vectors`` their embeddings)."""
    by_position = {int(r["position"]): r for r in rows}
    speakers = {p: row_speaker(r) for p, r in by_position.items()}
    named = named_speaker(query, set(speakers.values())) if rules.speaker_boost > 0 else None
    scores = boost_speaker({p: spread[p][0] for p in pool if p in by_position}, speakers, named, rules.speaker_boost)
    shares: Dict[int, float] = {}
    if bridge is not None and vectors:
        bridged = bridge_scores(scores, bridge[0], bridge[1], vectors, rules)
        scores = {p: b["score"] for p, b in bridged.items()}
        shares = {p: b["share"] for p, b in bridged.items()}
    units: List[RecalledUnit] = []
    for p in best(scores, k):
        units.append(recalled_from_row(by_position[p], round(scores[p], 6), found_by.get(p, []), spread[p][1],
                                       speaker_named=named is not None and speakers[p] == named,
                                       bridged=round(shares.get(p, 0.0), 6)))
    return Recall(units=units, before=before, k=k, latency_ms=(time.perf_counter() - started) * 1000)


class EpisodicMemory:
    """Messages of every conversation in one Milvus collection, recalled per owner and conversation."""

    def __init__(self, *, client: MilvusClient, embed_model: BaseEmbedding, dim: int,
                 collection_name: str = DEFAULT_COLLECTION, rules: Optional[RecallRules] = None,
                 target: Optional[MilvusTarget] = None, cached_rows: int = DEFAULT_CACHED_ROWS,
                 word_table: bool = True) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise ConfigurationError(f"dim must be an int >= 1 (the embedding size), got {dim!r}")
        self._client = client
        self._embed_model = embed_model
        self._collection_name = collection_name
        self._rules = rules if rules is not None else RecallRules()
        self._target = target
        self._dim = dim
        self._ready = False
        self._aclients = LoopClients(target, "async memory calls need target= (a MilvusTarget) to open Milvus' "
                                            "async client")
        self._known: "OrderedDict[Tuple[str, str], None]" = OrderedDict()
        self._known_lock = threading.Lock()
        self._words = WordVectors(embed_model, table=word_table_source(embed_model) if word_table else None)
        self._word_threads = LazyThreads(WORD_THREADS, "convrag-recall-words")
        self._rows = RowCache(cached_rows)

    @classmethod
    def from_defaults(cls, *, embed_model: BaseEmbedding, target: Optional[MilvusTarget] = None,
                      client: Optional[MilvusClient] = None, collection_name: str = DEFAULT_COLLECTION,
                      rules: Optional[RecallRules] = None, dim: Optional[int] = None,
                      cached_rows: int = DEFAULT_CACHED_ROWS, word_table: bool = True) -> "EpisodicMemory":
        """Connect (``client`` or ``target``); ``dim`` defaults to the model's ``dimension`` (one probe embedding
        when it has none); ``cached_rows``: the recalled fields kept in this process (:mod:`.episodic_rows`; 0
        reads every recall's candidates from Milvus); ``word_table``: the bridge reads the local model's words from
        its vocabulary table (:mod:`~llama_index_convrag.embeddings.word_table`, made once per machine in the
        background on first use) instead of embedding them; False embeds every word it has not seen."""
        client = open_client(client, target)
        if dim is None:
            dim = getattr(embed_model, "dimension", None)
        if dim is None:
            dim = len(embed_model.get_text_embedding("dimension probe"))
        return cls(client=client, embed_model=embed_model, dim=int(dim), collection_name=collection_name,
                   rules=rules, target=target, cached_rows=cached_rows, word_table=word_table)

    @property
    def rules(self) -> RecallRules:
        return self._rules

    @property
    def target(self) -> Optional[MilvusTarget]:
        """Where Milvus is (None: only a client was given; the async calls then need one)."""
        return self._target

    @property
    def collection_name(self) -> str:
        return self._collection_name

    # -- the collection ---------------------------------------------------------------------------------------
    def ensure_collection(self) -> bool:
        """Create the collection unless it exists (True when created). A collection of the earlier layout (one row
        per message, :data:`~.episodic_schema.OLD`) is dropped and created anew, with a warning: its rows are derived
        from the conversation store, and each conversation's next turn indexes every message its rows lack
        (:meth:`unindexed`); until then its recall is empty."""
        if layout_of(self._client, self._collection_name) == OLD:
            logger.warning("episodic memory collection %r has the earlier layout (one row per message); dropping and "
                           "creating it anew: each conversation is indexed again at its next turn",
                           self._collection_name)
            self._client.drop_collection(self._collection_name)
            with self._known_lock:
                self._known.clear()
            self._rows.clear()
        created = create_episodic_collection(self._client, self._collection_name, self._dim,
                                             is_lite=self._target.is_lite if self._target is not None else True)
        self._ready = True
        return created

    def _exists(self) -> bool:
        if not self._ready:
            layout = layout_of(self._client, self._collection_name)
            if layout == OLD:
                self.ensure_collection()
            self._ready = layout is not None
        return self._ready

    # -- writing ----------------------------------------------------------------------------------------------
    def index(self, units: Sequence[MemoryUnit], context: Sequence[MemoryUnit] = ()) -> int:
        """Index ``units`` (upsert: indexing a position again replaces it); ``context``: the messages just before
        the first of them, for their context texts. Returns the number of messages written (two rows each)."""
        if not units:
            return 0
        texts = unit_texts(units, context, self._rules)
        vectors = self._embed_model.get_text_embedding_batch([t for _, own, ctx in texts for t in (own, ctx)])
        if not self._ready:
            self.ensure_collection()
        rows, mark = rows_of(texts, vectors), self._rows.mark()
        for i in range(0, len(rows), INSERT_BATCH):
            self._client.upsert(self._collection_name, rows[i:i + INSERT_BATCH])
        self._written(units, mark)
        self._words.lookup(self._vocabulary(units))
        return len(texts)

    async def aindex(self, units: Sequence[MemoryUnit], context: Sequence[MemoryUnit] = ()) -> int:
        """Async twin of :meth:`index`."""
        if not units:
            return 0
        texts = unit_texts(units, context, self._rules)
        vectors = await self._embed_model.aget_text_embedding_batch(
            [t for _, own, ctx in texts for t in (own, ctx)])
        if not self._ready:
            await asyncio.to_thread(self.ensure_collection)
        rows, mark = rows_of(texts, vectors), self._rows.mark()
        client = self._async_client()
        for i in range(0, len(rows), INSERT_BATCH):
            await client.upsert(self._collection_name, rows[i:i + INSERT_BATCH])
        self._written(units, mark)
        await self._words.alookup(self._vocabulary(units))
        return len(texts)

    def _written(self, units: Sequence[MemoryUnit], mark: int) -> None:
        """After a write: its conversations hold messages (:meth:`_holds`), and their rows are cached."""
        self._remember({(u.owner, u.conversation_id): None for u in units})
        by_scope: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
        for u in units:
            by_scope.setdefault((u.owner, u.conversation_id), []).append(unit_row(u))
        for scope, rows in by_scope.items():
            self._rows.put(scope, rows, mark)

    def _vocabulary(self, units: Sequence[MemoryUnit]) -> List[str]:
        """The units' content words, whose vectors the bridge step will read (none when it is off): embedded with
        the write, so that a recall finds them cached."""
        if self._rules.bridge_boost <= 0:
            return []
        return batch_words([u.text for u in units], self._rules)

    def _turn_units(self, owner: str, conversation_id: str, history: Sequence[Any],
                    new: int) -> Tuple[List[MemoryUnit], List[MemoryUnit]]:
        if isinstance(new, bool) or not isinstance(new, int) or new < 0:
            raise ConfigurationError(f"new must be an int >= 0 (the messages the turn added), got {new!r}")
        units = units_of_messages(owner, conversation_id, history)
        cut = max(0, len(units) - new)
        return units[cut:], units[max(0, cut - self._rules.context_before):cut]

    def index_turn(self, owner: str, conversation_id: str, history: Sequence[Any], new: int = 2) -> int:
        """Index the last ``new`` messages of a conversation's history (a committed turn: its question and answer;
        ``history``: every message in order, as the store's ``Message``), their context from the ones before."""
        units, context = self._turn_units(owner, conversation_id, history, new)
        return self.index(units, context)

    async def aindex_turn(self, owner: str, conversation_id: str, history: Sequence[Any], new: int = 2) -> int:
        """Async twin of :meth:`index_turn`."""
        units, context = self._turn_units(owner, conversation_id, history, new)
        return await self.aindex(units, context)

    def index_positions(self, owner: str, conversation_id: str, messages: Sequence[Any],
                        positions: Sequence[int]) -> Tuple[int, int]:
        """Bring the rows at ``positions`` of a stored conversation up to date (``messages``: every stored message,
        oldest first; positions are indices there, :func:`~.units.units_of_conversation`): index the messages in the
        history, delete the rows of those that are not (a superseded or failed answer). Returns ``(indexed,
        deleted)``."""
        units = units_of_conversation(owner, conversation_id, messages, positions)
        gone = sorted(set(positions) - {u.position for u in units})
        context = units_of_conversation(owner, conversation_id, messages,
                                        history_before(messages, min(positions, default=0), self._rules.context_before))
        written = self.index(units, context)
        if gone and self._exists():
            self._client.delete(self._collection_name, ids=row_ids(owner, conversation_id, gone))
            self._rows.drop((owner, conversation_id), gone)  # after: a read begun before the delete is not kept
        return written, len(gone)

    def unindexed(self, owner: str, conversation_id: str, messages: Sequence[Any], before: int) -> List[int]:
        """The history positions below ``before`` of a stored conversation that have no row (their write was lost:
        a crash, or dropped at shutdown). One count query when none is missing; a query of the positions when
        some are."""
        expected = [p for p in range(min(before, len(messages))) if in_history(messages[p])]
        if not expected or not self._exists():
            return expected
        expr = f"{scope_expr(owner, conversation_id)} and kind == {OWN} and position < {int(before)}"
        rows = self._client.query(self._collection_name, filter=expr, output_fields=["count(*)"])
        if rows and int(rows[0]["count(*)"]) >= len(expected):
            return []
        found = {int(r["position"]) for r in self._client.query(self._collection_name, filter=expr,
                                                                 output_fields=["position"])}
        return [p for p in expected if p not in found]

    def delete_conversation(self, owner: str, conversation_id: str) -> None:
        """Delete every indexed message of ``owner``'s conversation (nothing of another owner's)."""
        expr = scope_expr(owner, conversation_id)
        self._forget(owner, conversation_id)
        if self._exists():
            self._client.delete(self._collection_name, filter=expr)
            self._rows.forget((owner, conversation_id))  # again after: a read begun before the delete is not kept

    async def adelete_conversation(self, owner: str, conversation_id: str) -> None:
        """Async twin of :meth:`delete_conversation`."""
        expr = scope_expr(owner, conversation_id)
        self._forget(owner, conversation_id)
        if await asyncio.to_thread(self._exists):
            await self._async_client().delete(self._collection_name, filter=expr)
            self._rows.forget((owner, conversation_id))

    def count(self, owner: str, conversation_id: str) -> int:
        """Indexed messages of ``owner``'s conversation."""
        expr = f"{scope_expr(owner, conversation_id)} and kind == {OWN}"
        if not self._exists():
            return 0
        rows = self._client.query(self._collection_name, filter=expr, output_fields=["count(*)"])
        return int(rows[0]["count(*)"]) if rows else 0

    # -- recall -----------------------------------------------------------------------------------------------
    # _NOT_YET: while the collection holds none of the conversation's messages there is nothing to recall, and a
    # search could fail in Milvus (empty BM25 statistics: "NaN or Inf"; the background writer still creating the
    # collection: "index not found"), so the recall is empty without a search. A conversation this memory indexed
    # or found rows of before is known to hold some (no query); else one count query tells.
    def _remember(self, scopes: Iterable[Tuple[str, str]]) -> None:
        with self._known_lock:
            for scope in scopes:
                self._known[scope] = None
                self._known.move_to_end(scope)
            while len(self._known) > KNOWN_MAX:
                self._known.popitem(last=False)

    def _forget(self, owner: str, conversation_id: str) -> None:
        with self._known_lock:
            self._known.pop((owner, conversation_id), None)
        self._rows.forget((owner, conversation_id))

    def _holds(self, owner: str, conversation_id: str) -> bool:
        """Whether the conversation has indexed messages (see _NOT_YET)."""
        if (owner, conversation_id) in self._known:
            return True
        if self.count(owner, conversation_id) == 0:
            return False
        self._remember([(owner, conversation_id)])
        return True

    def query_bundle(self, query: Query) -> QueryBundle:
        """``query`` as a bundle with its embedding from this memory's model (a given embedding is kept)."""
        if isinstance(query, QueryBundle) and query.embedding is not None:
            return query
        text = query_text(query)
        return QueryBundle(query_str=text, embedding=self._embed_model.get_query_embedding(text))

    async def aquery_bundle(self, query: Query) -> QueryBundle:
        """Async twin of :meth:`query_bundle`."""
        if isinstance(query, QueryBundle) and query.embedding is not None:
            return query
        text = query_text(query)
        return QueryBundle(query_str=text, embedding=await self._embed_model.aget_query_embedding(text))

    def recall(self, query: Query, *, owner: str, conversation_id: str, before: Optional[int] = None,
               k: int = 10) -> Recall:
        """The ``k`` best messages of ``owner``'s conversation at positions below ``before`` (the recent window
        starts there; ``None``: every indexed message) for the turn's retrieval ``query``."""
        started = time.perf_counter()
        expr = search_expr(owner, conversation_id, before)
        select({}, k)  # validates k
        if not self._exists() or not self._holds(owner, conversation_id):
            return Recall(units=[], before=before, k=k)  # see _NOT_YET
        text = query_text(query)
        vector = query.embedding if isinstance(query, QueryBundle) and query.embedding is not None else \
            self._embed_model.get_query_embedding(text)
        words = self._words.missing(self._query_vocabulary(text))

        def search() -> Tuple[Any, ...]:
            return drive(self._client, self._recall_steps(expr, vector, text, owner, conversation_id, before, k))

        # the query's words neither the word table nor the cache holds are embedded in a worker thread while the
        # searches run (none: no worker)
        found = run_beside(search, lambda: self._words.lookup(words), self._word_threads.get()) if words else search()
        return self._finish(found, text, before, k, started)

    async def arecall(self, query: Query, *, owner: str, conversation_id: str, before: Optional[int] = None,
                      k: int = 10) -> Recall:
        """Async twin of :meth:`recall` (the two searches run at once)."""
        started = time.perf_counter()
        expr = search_expr(owner, conversation_id, before)
        select({}, k)
        if not (self._ready or await asyncio.to_thread(self._exists)):
            return Recall(units=[], before=before, k=k)
        if (owner, conversation_id) not in self._known and not await asyncio.to_thread(self._holds, owner,
                                                                                         conversation_id):
            return Recall(units=[], before=before, k=k)  # see _NOT_YET
        text = query_text(query)
        vector = query.embedding if isinstance(query, QueryBundle) and query.embedding is not None else \
            await self._embed_model.aget_query_embedding(text)
        words = self._words.missing(self._query_vocabulary(text))
        search = adrive(self._async_client(), self._recall_steps(expr, vector, text, owner, conversation_id, before, k))
        found = await (arun_beside(search, asyncio.to_thread(self._words.lookup, words)) if words else search)
        return self._finish(found, text, before, k, started)

    def _query_vocabulary(self, text: str) -> List[str]:
        """The query's content words, whose vectors the bridge step reads (none when it is off)."""
        return text_words(text, self._rules) if self._rules.bridge_boost > 0 else []

    def close(self) -> None:
        """Stop the worker threads that embed queries' words (a later recall makes them again)."""
        self._word_threads.close()

    def _recall_steps(self, expr: str, vector: Sequence[float], text: str, owner: str, conversation_id: str,
                      before: Optional[int], k: int) -> MilvusSteps:
        """One recall's Milvus calls (sync and async drivers above): the two searches, then one ``get`` of the fields
        of the best candidates the row cache lacks (:mod:`.episodic_rows`; none: no ``get``; a neighbour never
        indexed has no row and is skipped); returns the candidates (:func:`plan_recall`) and their rows, in the
        candidates' order."""
        dense, bm25 = yield search_calls(self._collection_name, expr, vector, text, self._rules)
        ranking = rank(dense[0] if dense else [], bm25[0] if bm25 else [], self._rules)
        pool, spread, found_by = plan_recall(ranking, self._rules, before, k)
        scope = (owner, conversation_id)
        cached, missing = self._rows.split(scope, pool, found_by_search={_position(key) for key, _ in ranking.kept})
        if missing:
            mark = self._rows.mark()
            [got] = yield [MilvusCall("get", (self._collection_name,), {
                "ids": [unit_key(owner, conversation_id, p) for p in missing], "output_fields": list(OUTPUT_FIELDS)})]
            read = {int(r["position"]): r for r in owned(got, owner, conversation_id)}
            self._rows.put(scope, read.values(), mark, absent=[p for p in missing if p not in read])
            cached.update(read)
        return pool, spread, found_by, [cached[p] for p in pool if p in cached]

    def _finish(self, found: Tuple[Any, ...], text: str, before: Optional[int], k: int, started: float) -> Recall:
        """The recall from the candidates and rows :meth:`_recall_steps` returned, after the speaker and bridge
        steps. The bridge's words are cached: the messages' when they were indexed, the query's while the searches
        ran; one missing (after a restart) is embedded here."""
        pool, spread, found_by, rows = found
        bridge = bridge_words(rows, text, self._rules)
        vectors = self._words.lookup(wanted_words(bridge)) if bridge is not None else None
        return finish_recall(pool, spread, found_by, rows, text, self._rules, before, k, started, bridge, vectors)

    def _async_client(self) -> Any:
        """One ``AsyncMilvusClient`` per running event loop (needs ``target``)."""
        return self._aclients.get()
