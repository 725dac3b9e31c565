"""Retrieve small, read big: each hit widened to its neighbouring chunks of the same document before it is read.

Retrieval ranks window-sized chunks (what the embedding model reads whole); the answerer and the extractive answer
then read each hit with the chunks around it, fetched from Milvus by document id and chunk number (``chunk`` in a
chunk's metadata, written by ingest) in one query per turn; chunks already among the hits are not fetched again (no
query when every chunk to read is a hit). Hits of one document whose neighbourhoods overlap or
touch become one passage at the best hit's place (later hits are not repeated); the overlap ingest leaves between
neighbouring chunks is read once. A widened node keeps the id, score, metadata and rank trail of the chunk that
matched, so citations still point at it; :data:`WIDEN_KEY` (hidden from prompts and embeddings) records the
chunks read and where each matched chunk sits in the passage (character spans), so a page can show the chunk
inside its passage and the token budget can cut a passage back to its matched chunks (:func:`narrowed_nodes`).

Nodes without a document id or chunk number (another layout, a node from elsewhere) pass unchanged.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError
from llama_index_convrag.instrumentation import span_when_observed
from llama_index_convrag.milvus.filters import quote_string
from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever
from llama_index_convrag.rank_trail import hide_key

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from pymilvus import MilvusClient

    from llama_index_convrag.milvus.schema import CollectionSpec

dispatcher = get_dispatcher(__name__)

#: Metadata key of a widened node: ``{"chunks": [first, last], "matched": [[chunk, start, end, node_id], ...],
#: "length": characters of the passage}`` (best match first; spans in the passage text, in characters).
WIDEN_KEY = "convrag_widened"
CHUNK_KEY, DOC_KEY = "chunk", "doc_id"
#: Overlaps shorter than this many characters are taken for chance, not for the splitter's overlap.
MIN_OVERLAP_CHARS = 8
#: Joins the matched chunks of a narrowed passage that are not next to each other.
GAP = " … "


@dataclass(frozen=True)
class WidenRules:
    """How far a hit is widened: ``before`` / ``after`` chunks of its document on each side (a hit at an edge of
    its document reads as many chunks, all on the other side); ``passages``: read at most that many passages, the
    places that hits merged into another's passage free going to the next hits (None: every hit's).

    One chunk each side, at most 5 passages (the defaults; the retriever returns 10 hits): a hit read with its
    neighbours is three window-sized chunks, about the former 700-token chunk, and 5 such passages hold the answer
    at least as often as the former top 5 chunks on CAsT 2021 and RGB (``bench/answer_containment.py --passages``;
    docs/results/variants.md).
    """

    before: int = 1
    after: int = 1
    passages: Optional[int] = 5

    def __post_init__(self) -> None:
        for name in ("before", "after"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 16:
                raise ConfigurationError(f"{name} must be an int in [0, 16] (chunks), got {value!r}")
        if self.passages is not None and (not isinstance(self.passages, int) or isinstance(self.passages, bool)
                                          or self.passages < 1):
            raise ConfigurationError(f"passages must be None or an int >= 1, got {self.passages!r}")


@dataclass
class Passage:
    """One passage to read: a range of chunks of one document and the hits (positions in the input) inside it;
    ``doc_id`` None: one hit read as it is."""

    doc_id: Optional[str]
    first: int
    last: int
    hits: List[int] = field(default_factory=list)


def hit_key(nws: NodeWithScore) -> Optional[Tuple[str, int, Optional[int]]]:
    """``(document id, chunk number, chunk count)`` of a hit, or None when it lacks them."""
    meta = nws.node.metadata
    doc_id = nws.node.ref_doc_id or meta.get(DOC_KEY)
    chunk = meta.get(CHUNK_KEY)
    if doc_id is None or not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 0:
        return None
    count = meta.get("chunk_count")
    return str(doc_id), chunk, count if isinstance(count, int) and count > chunk else None


def plan_passages(keys: Sequence[Optional[Tuple[str, int, Optional[int]]]], rules: WidenRules) -> List[Passage]:
    """The passages to read, in the order of their best hit (pure). A hit's neighbourhood is ``before + after + 1``
    chunks around it, shifted inward at an edge of its document (a first chunk reads the ones after it); it takes in
    every passage of its document that it overlaps or touches. A hit without a key is a passage of its own, read as
    it is (``doc_id`` None). With ``rules.passages``, hits after the one that makes that many passages are not read:
    a hit merged into another's passage leaves its place to the next hit."""
    passages: List[Passage] = []
    span = rules.before + rules.after + 1
    for i, key in enumerate(keys):
        if rules.passages is not None and len(passages) >= rules.passages:
            break
        if key is None:
            passages.append(Passage(None, 0, -1, [i]))
            continue
        doc_id, chunk, count = key
        first = max(0, chunk - rules.before)
        if count is not None:
            first = max(0, min(first, count - span))
        last = first + span - 1 if count is None else min(count - 1, first + span - 1)
        new = Passage(doc_id, first, max(last, chunk), [i])
        while True:
            other = next((p for p in passages if p.doc_id == doc_id and p.first <= new.last + 1
                          and new.first <= p.last + 1), None)
            if other is None:
                break
            passages.remove(other)
            new = Passage(doc_id, min(new.first, other.first), max(new.last, other.last), sorted(other.hits + new.hits))
        passages.append(new)
    return sorted(passages, key=lambda p: p.hits[0])


def join_chunks(texts: Sequence[str]) -> Tuple[str, List[int]]:
    """Neighbouring chunks as one text, their shared overlap read once; and where each chunk starts in it (pure)."""
    out, starts = "", []
    for text in texts:
        if not out:
            starts.append(0)
            out = text
            continue
        k = _overlap(out, text)
        if k:
            starts.append(len(out) - k)
            out += text[k:]
        else:
            starts.append(len(out) + 1)
            out = f"{out} {text}"
    return out, starts


def _overlap(left: str, right: str) -> int:
    """Length of the longest suffix of ``left`` that starts ``right``; 0 below :data:`MIN_OVERLAP_CHARS`."""
    for k in range(min(len(left), len(right)), MIN_OVERLAP_CHARS - 1, -1):
        if left.endswith(right[:k]):
            return k
    return 0


def passage_node(nodes: Sequence[NodeWithScore], passage: Passage, texts: Mapping[int, str]) -> NodeWithScore:
    """The best hit of ``passage`` carrying the passage's text (chunks ``first..last`` of ``texts``, by chunk number,
    hits' own texts where a row is missing) and :data:`WIDEN_KEY`."""
    own: Dict[int, NodeWithScore] = {}
    for i in passage.hits:  # best first; a chunk hit twice keeps its best place
        own.setdefault(nodes[i].node.metadata[CHUNK_KEY], nodes[i])
    numbers = [n for n in range(passage.first, passage.last + 1) if n in texts or n in own]
    parts = [own[n].node.get_content(metadata_mode=MetadataMode.NONE) if n in own else texts[n] for n in numbers]
    text, starts = join_chunks(parts)
    best = nodes[passage.hits[0]]
    matched = [[n, starts[numbers.index(n)], starts[numbers.index(n)] + len(parts[numbers.index(n)]),
                hit.node.node_id] for n, hit in own.items()]
    node = best.node.model_copy(deep=False)
    node.metadata = dict(best.node.metadata)
    node.excluded_llm_metadata_keys = list(best.node.excluded_llm_metadata_keys)
    node.excluded_embed_metadata_keys = list(best.node.excluded_embed_metadata_keys)
    node.set_content(text)
    node.metadata[WIDEN_KEY] = {"chunks": [numbers[0], numbers[-1]], "matched": matched, "length": len(text)}
    hide_key(node, WIDEN_KEY)
    return NodeWithScore(node=node, score=best.score)


def widen_nodes(nodes: Sequence[NodeWithScore], rules: WidenRules, texts: Mapping[Tuple[str, int], str]
                ) -> List[NodeWithScore]:
    """``nodes`` widened with ``texts`` (``(doc id, chunk) -> text`` of the fetched neighbours), pure; a node
    without a key stays as it is, in its place."""
    out: List[NodeWithScore] = []
    for p in plan_passages([hit_key(n) for n in nodes], rules):
        if p.doc_id is None:
            out.append(nodes[p.hits[0]])
        else:
            out.append(passage_node(nodes, p, {c: t for (d, c), t in texts.items() if d == p.doc_id}))
    return out


def wanted_ranges(nodes: Sequence[NodeWithScore], rules: WidenRules) -> List[Tuple[str, int, int]]:
    """``(doc id, first, last)`` chunk ranges to fetch for ``nodes`` (pure)."""
    return [(p.doc_id, p.first, p.last) for p in plan_passages([hit_key(n) for n in nodes], rules)
            if p.doc_id is not None]


def hit_texts(nodes: Sequence[NodeWithScore]) -> Dict[Tuple[str, int], str]:
    """``(doc id, chunk) -> text`` of the hits that have a key (pure): chunks the widening need not fetch."""
    out: Dict[Tuple[str, int], str] = {}
    for n in nodes:
        key = hit_key(n)
        if key is not None:
            out.setdefault((key[0], key[1]), n.node.get_content(metadata_mode=MetadataMode.NONE))
    return out


def missing_ranges(ranges: Sequence[Tuple[str, int, int]], known: Mapping[Tuple[str, int], str]
                   ) -> List[Tuple[str, int, int]]:
    """The runs of ``ranges``' chunks not in ``known`` (pure): what is left to fetch."""
    out: List[Tuple[str, int, int]] = []
    for doc, first, last in ranges:
        start: Optional[int] = None
        for chunk in range(first, last + 2):
            missing = chunk <= last and (doc, chunk) not in known
            if missing and start is None:
                start = chunk
            elif not missing and start is not None:
                out.append((doc, start, chunk - 1))
                start = None
    return out


def narrow_text(nws: NodeWithScore) -> Optional[str]:
    """The text of a widened node cut back to its matched chunks (document order, :data:`GAP` between chunks that
    are not neighbours); None for a node that is not widened."""
    info = nws.node.metadata.get(WIDEN_KEY)
    if not info:
        return None
    text = nws.node.get_content(metadata_mode=MetadataMode.NONE)
    spans = sorted((m[1], m[2], m[0]) for m in info["matched"])
    out, prev_end, prev_chunk = "", None, None
    for start, end, chunk in spans:
        if prev_end is None:
            out = text[start:end]
        elif prev_chunk is not None and chunk == prev_chunk + 1 and start <= prev_end:
            out += text[prev_end:end]
        else:
            out += GAP + text[start:end]
        prev_end, prev_chunk = max(end, prev_end or 0), chunk
    return out


def narrowed(nws: NodeWithScore) -> NodeWithScore:
    """A copy of a widened node that reads only its matched chunks (the node itself when it is not widened)."""
    text = narrow_text(nws)
    if text is None:
        return nws
    node = nws.node.model_copy(deep=False)
    node.metadata = {k: v for k, v in nws.node.metadata.items() if k != WIDEN_KEY}
    node.set_content(text)
    return NodeWithScore(node=node, score=nws.score)


def narrow_contents(nodes: Sequence[NodeWithScore], metadata_mode: MetadataMode = MetadataMode.LLM
                    ) -> List[Optional[str]]:
    """What each node reads as once narrowed (``metadata_mode`` content), None for nodes that are not widened: the
    token budget's fallback for each passage (``chat.budget.message_fit_in(narrow_chunks=...)``)."""
    return [None if WIDEN_KEY not in n.node.metadata else narrowed(n).node.get_content(metadata_mode=metadata_mode)
            for n in nodes]


def narrowed_nodes(nodes: Sequence[NodeWithScore], indices: Iterable[int]) -> List[NodeWithScore]:
    """``nodes`` with those at ``indices`` narrowed (the passages whose widening the budget cut)."""
    cut = set(indices)
    return [narrowed(n) if i in cut else n for i, n in enumerate(nodes)]


def matched_span(metadata: Mapping[str, Any]) -> Optional[Tuple[int, int]]:
    """Where the best matched chunk sits in a widened node's text (``start``, ``end``), None when not widened."""
    info = metadata.get(WIDEN_KEY)
    if not info or not info.get("matched"):
        return None
    return int(info["matched"][0][1]), int(info["matched"][0][2])


#: Characters of the passage kept on each side of the matched chunk in a citation's excerpt.
CITATION_CONTEXT_CHARS = 600
#: A citation's excerpt of a node that is not widened: its first characters, as before.
CITATION_PLAIN_CHARS = 500


def citation_excerpt(node: Any) -> Tuple[str, Optional[Tuple[int, int]]]:
    """What a citation stores of ``node``: for a widened node the matched chunk with up to
    :data:`CITATION_CONTEXT_CHARS` of its passage on each side and the chunk's span in that excerpt (so a page
    shows the chunk inside its passage); else the first :data:`CITATION_PLAIN_CHARS` of its content and None."""
    span = matched_span(node.metadata)
    if span is None:
        return node.get_content()[:CITATION_PLAIN_CHARS], None
    text = node.get_content(metadata_mode=MetadataMode.NONE)
    start = max(0, span[0] - CITATION_CONTEXT_CHARS)
    end = min(len(text), span[1] + CITATION_CONTEXT_CHARS)
    return text[start:end], (span[0] - start, span[1] - start)


#: What the engines read around each hit unless told otherwise (``AnswerOptions.widen``, ``as_query_engine(widen=)``).
DEFAULT_WIDEN = WidenRules()


def widen_rules(value: Any, name: str) -> Optional[WidenRules]:
    """``value`` when it is a :class:`WidenRules` or None (read the matched chunks alone); else an error naming
    ``name``, the value and the accepted kinds."""
    if value is not None and not isinstance(value, WidenRules):
        raise ArgumentTypeError(f"{name} must be a WidenRules or None (the matched chunks alone), got {value!r}")
    return value


def with_widener(postprocessors: Optional[Sequence[BaseNodePostprocessor]], retriever: Any,
                 rules: Optional[WidenRules]) -> List[BaseNodePostprocessor]:
    """``postprocessors`` with a :class:`NeighbourWidener` over ``retriever``'s collection appended last, when
    ``rules`` is set, ``retriever`` is a :class:`MilvusHybridRetriever` (another retriever's nodes carry no chunk
    numbers to widen by) and no widener is in the list already."""
    out = list(postprocessors) if postprocessors is not None else []
    if rules is None or not isinstance(retriever, MilvusHybridRetriever) \
            or any(isinstance(p, NeighbourWidener) for p in out):
        return out
    return [*out, NeighbourWidener.from_retriever(retriever, rules)]


class NeighbourWidener(BaseNodePostprocessor):
    """Widens each hit to its neighbouring chunks (:class:`WidenRules`), those not among the hits fetched in one
    Milvus query (none when there are none); put it last.
    ``async_client``: returns the async Milvus client of the running loop (a retriever's), so the async twin queries
    on the loop; None: the async twin runs the sync query in a worker thread."""

    _client: Any = PrivateAttr()
    _async_client: Optional[Callable[[], Any]] = PrivateAttr(default=None)
    _collection_name: str = PrivateAttr()
    _spec: Any = PrivateAttr()
    _rules: WidenRules = PrivateAttr()

    def __init__(self, *, client: "MilvusClient", collection_name: str, spec: "CollectionSpec",
                 rules: Optional[WidenRules] = None, async_client: Optional[Callable[[], Any]] = None) -> None:
        if rules is not None and not isinstance(rules, WidenRules):
            raise ConfigurationError(f"rules must be a WidenRules, got {type(rules).__name__}")
        if async_client is not None and not callable(async_client):
            raise ConfigurationError(f"async_client must be a callable returning an async Milvus client, got "
                                     f"{type(async_client).__name__}")
        super().__init__()
        self._client = client
        self._async_client = async_client
        self._collection_name = collection_name
        self._spec = spec
        self._rules = rules if rules is not None else WidenRules()

    @classmethod
    def from_retriever(cls, retriever: Any, rules: Optional[WidenRules] = None) -> "NeighbourWidener":
        """The widener over the collection a ``MilvusHybridRetriever`` searches (and its async client, when it has
        the target to open one)."""
        return cls(client=retriever._client, collection_name=retriever.collection_name, spec=retriever.spec,
                   rules=rules, async_client=retriever._async_client if retriever.target is not None else None)

    @classmethod
    def class_name(cls) -> str:
        return "NeighbourWidener"

    @property
    def rules(self) -> WidenRules:
        return self._rules

    def filter_expr(self, ranges: Sequence[Tuple[str, int, int]]) -> str:
        """One Milvus expression for the chunk ranges (document id and chunk number, both escaped)."""
        chunk = self._spec.metadata_ref(CHUNK_KEY)
        doc = self._spec.doc_id_field
        return " or ".join(f"({doc} == {quote_string(d)} and {chunk} >= {a} and {chunk} <= {b})"
                           for d, a, b in ranges)

    def _query(self, ranges: Sequence[Tuple[str, int, int]]) -> Optional[Dict[str, Any]]:
        """The arguments of the one query that fetches ``ranges`` (None: nothing to fetch)."""
        spec = self._spec
        if not ranges or spec.doc_id_field is None:
            return None
        fields = [spec.doc_id_field, spec.text_field] + ([spec.metadata_field] if spec.metadata_field else [])
        return {"collection_name": self._collection_name, "filter": self.filter_expr(ranges), "output_fields": fields,
                "limit": sum(b - a + 1 for _, a, b in ranges)}

    def _texts(self, rows: Iterable[Mapping[str, Any]]) -> Dict[Tuple[str, int], str]:
        spec = self._spec
        out: Dict[Tuple[str, int], str] = {}
        for row in rows:
            meta = row.get(spec.metadata_field) if spec.metadata_field else row
            number = (meta or {}).get(CHUNK_KEY) if isinstance(meta, dict) else None
            if isinstance(number, int):
                out[(str(row[spec.doc_id_field]), number)] = str(row.get(spec.text_field, ""))
        return out

    def fetch(self, ranges: Sequence[Tuple[str, int, int]]) -> Dict[Tuple[str, int], str]:
        """``(doc id, chunk) -> text`` of every stored chunk in ``ranges``, in one query."""
        query = self._query(ranges)
        return {} if query is None else self._texts(self._client.query(**query))

    async def afetch(self, ranges: Sequence[Tuple[str, int, int]]) -> Dict[Tuple[str, int], str]:
        """Async twin of :meth:`fetch` (on the async client; without one, the sync query in a worker thread)."""
        query = self._query(ranges)
        if query is None:
            return {}
        if self._async_client is None:
            return await asyncio.to_thread(self.fetch, ranges)
        return self._texts(await self._async_client().query(**query))

    @span_when_observed(dispatcher)  # a span only when a handler listens
    def _postprocess_nodes(self, nodes: List[NodeWithScore], query_bundle: Optional[QueryBundle] = None
                           ) -> List[NodeWithScore]:
        if self._spec.doc_id_field is None:
            return list(nodes)
        known = hit_texts(nodes)
        return widen_nodes(nodes, self._rules,
                           {**known, **self.fetch(missing_ranges(wanted_ranges(nodes, self._rules), known))})

    @span_when_observed(dispatcher)  # a span only when a handler listens
    async def _apostprocess_nodes(self, nodes: List[NodeWithScore], query_bundle: Optional[QueryBundle] = None
                                  ) -> List[NodeWithScore]:
        if self._spec.doc_id_field is None:
            return list(nodes)
        known = hit_texts(nodes)
        return widen_nodes(nodes, self._rules,
                           {**known, **await self.afetch(missing_ranges(wanted_ranges(nodes, self._rules), known))})
