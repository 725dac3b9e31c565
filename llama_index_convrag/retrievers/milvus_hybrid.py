"""``MilvusHybridRetriever``: dense, BM25 or hybrid search over one Milvus collection, with a rank trail.

How each mode runs (one or more Milvus calls, never asking for vectors or BM25 outputs):

* ``dense`` / ``sparse``: one ``search`` on the field (``limit = similarity_top_k``); BM25 gets the raw text.
* ``hybrid`` + ``rrf``: one ``hybrid_search`` with one ``AnnSearchRequest`` per chosen field and ``RRFRanker(k)``.
  With ``explain=True`` it instead runs one ``search`` per field and fuses client-side with the same formula
  (:func:`fusion.rrf`), so each node also carries its per-field rank and score.
* ``hybrid`` + ``weighted``: one ``search`` per field (``fusion_depth`` candidates each, default 100) and
  client-side min-max-normalised weighted fusion (:func:`fusion.weighted`). When more candidates come back than
  are kept, the searches return ids and scores only and one ``get`` fetches the kept candidates' fields. Milvus' own
  ``WeightedRanker`` mixes unbounded BM25 with cosine and measured worse than dense alone (figures: README).
* ``feedback`` (default on for weighted hybrid, :mod:`~llama_index_convrag.retrievers.feedback`): after the
  fusion above, one ``get`` of the dense vectors of the best ``docs`` fused hits and a second search of the dense
  field with the moved query vector; a second fusion takes the first dense list, the BM25 list and the feedback
  list, the dense field's weight split evenly between its two lists (trail stage ``feedback:<field>``).
  ``feedback=False`` gives the single-round fusion.
* ``model``: the fusion above (``pre_ranker_type``) down to ``pre_topk`` nodes, then ``ranker_params["model"]``
  (any ``BaseNodePostprocessor``) reranks them with the ``QueryBundle``; the first ``similarity_top_k`` are kept.

Every node's id is the Milvus primary key (as a string); ``node.ref_doc_id`` is the document id; the trail
(:mod:`llama_index_convrag.rank_trail`) holds ``dense:<field>`` / ``sparse:<field>``, ``fusion:rrf`` /
``fusion:weighted`` and ``rerank`` stages. ``NodeWithScore.score`` is the final score.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from llama_index.core.base import base_retriever as core_retriever
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks import CallbackManager
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.schema import NodeWithScore, QueryBundle, QueryType
from pymilvus import MilvusClient, RRFRanker

from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError
from llama_index_convrag.instrumentation import observed, unspanned
from llama_index_convrag.milvus.calls import LoopClients, MilvusCall, MilvusSteps, adrive, drive
from llama_index_convrag.milvus.client import MilvusConnectionError, MilvusTarget
from llama_index_convrag.embeddings.identity import embed_model_id
from llama_index_convrag.milvus.schema import (CollectionSpec, check_embed_model, detect_spec, node_from_entity,
                                               open_client)
from llama_index_convrag.rank_trail import add_stage, add_stages, get_trail
from llama_index_convrag.retrievers import fusion
from llama_index_convrag.retrievers.feedback import feedback_vector
from llama_index_convrag.retrievers.ranking import FieldRequest, Ranking, known_entities, stage_label
from llama_index_convrag.retrievers.params import PARAM_NAMES, RetrieverParams, validate_params

dispatcher = get_dispatcher(__name__)




def _bundle(query: QueryType) -> QueryBundle:
    return QueryBundle(query) if isinstance(query, str) else query


def _bundles(queries: Sequence[QueryType]) -> List[QueryBundle]:
    """Several queries as bundles; one query string or bundle given alone is an error (a string would otherwise be
    searched letter by letter)."""
    if isinstance(queries, (str, QueryBundle)):
        raise ArgumentTypeError(f"queries must be a list of query strings or QueryBundles, got one "
                                f"{type(queries).__name__}: {queries!r}; pass [query]")
    return [_bundle(q) for q in queries]


class MilvusHybridRetriever(BaseRetriever):
    """Dense / BM25 / hybrid retrieval with RRF, normalised weighted or model reranking (see module docstring)."""

    #: The keyword names :meth:`from_defaults` and :meth:`with_params` accept for retrieval behaviour.
    KWARGS: frozenset = PARAM_NAMES

    def __init__(
        self,
        *,
        client: MilvusClient,
        collection_name: str,
        spec: CollectionSpec,
        params: RetrieverParams,
        embed_models: Mapping[str, BaseEmbedding],
        target: Optional[MilvusTarget] = None,
        param_kwargs: Optional[Mapping[str, Any]] = None,
        callback_manager: Optional[CallbackManager] = None,
        verbose: bool = False,
    ) -> None:
        missing = [f for f in params.search_fields if f in spec.dense_fields and f not in embed_models]
        if missing:
            raise ConfigurationError(f"no embedding model for dense field(s) {missing}; given for {sorted(embed_models)}")
        self._client = client
        self._collection_name = collection_name
        self._spec = spec
        self._params = params
        self._embed_models = dict(embed_models)
        self._target = target
        self._param_kwargs = dict(param_kwargs) if param_kwargs is not None else {}
        self._aclients = LoopClients(target, "async retrieval needs target= (a MilvusTarget) to open Milvus' async "
                                            "client")
        self._output_fields = spec.output_fields()
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @classmethod
    def from_defaults(
        cls,
        *,
        collection_name: str,
        embed_model: Optional[BaseEmbedding] = None,
        client: Optional[MilvusClient] = None,
        target: Optional[MilvusTarget] = None,
        spec: Optional[CollectionSpec] = None,
        field_embed_models: Optional[Mapping[str, BaseEmbedding]] = None,
        callback_manager: Optional[CallbackManager] = None,
        **kwargs: Any,
    ) -> "MilvusHybridRetriever":
        """Connect (``client`` or ``target``), read the schema unless ``spec`` is given (the only I/O), validate.

        ``embed_model`` embeds queries for every dense field unless ``field_embed_models`` names one per field.
        ``kwargs`` are the retriever parameters in :attr:`KWARGS`; anything else is rejected.
        """
        unknown = sorted(set(kwargs) - cls.KWARGS)
        if unknown:
            raise ArgumentTypeError(f"unknown retriever argument(s) {unknown}; accepted: {sorted(cls.KWARGS)}")
        client = open_client(client, target)
        if spec is None:
            try:
                spec = detect_spec(client, collection_name)
            except MilvusConnectionError:
                raise
            except ValueError:
                raise
            except Exception as exc:
                uri = target.uri if target is not None else "<given client>"
                raise MilvusConnectionError(f"cannot read collection {collection_name!r} at {uri!r}: {exc}") from exc
        check_embed_model(spec, embed_model_id(embed_model), collection_name)
        params = validate_params(spec, **kwargs)
        models: Dict[str, BaseEmbedding] = {}
        if embed_model is not None:
            models.update({f: embed_model for f in spec.dense_fields})
        models.update(field_embed_models or {})
        return cls(client=client, collection_name=collection_name, spec=spec, params=params, embed_models=models,
                   target=target, param_kwargs=kwargs, callback_manager=callback_manager)

    # -- public accessors -------------------------------------------------------------------------------------
    @property
    def params(self) -> RetrieverParams:
        return self._params

    @property
    def spec(self) -> CollectionSpec:
        return self._spec

    @property
    def collection_name(self) -> str:
        return self._collection_name

    @property
    def client(self) -> MilvusClient:
        """The Milvus client it searches with (the chat engine's memory indexes into the same Milvus)."""
        return self._client

    @property
    def target(self) -> Optional[MilvusTarget]:
        return self._target

    @property
    def embed_models(self) -> Dict[str, BaseEmbedding]:
        """The query embedding model of each dense field (a copy)."""
        return dict(self._embed_models)

    @property
    def rankable(self) -> bool:
        """Whether :meth:`rank_many` gives this retriever's ranking (no model reranking, which reads the texts)."""
        return self._params.ranker_type != "model"

    def with_params(self, **overrides: Any) -> "MilvusHybridRetriever":
        """A copy with some parameters changed (per-query overrides), validated like the constructor's."""
        unknown = sorted(set(overrides) - self.KWARGS)
        if unknown:
            raise ArgumentTypeError(f"unknown retriever argument(s) {unknown}; accepted: {sorted(self.KWARGS)}")
        kwargs = {**self._param_kwargs, **overrides}
        return type(self)(client=self._client, collection_name=self._collection_name, spec=self._spec,
                          params=validate_params(self._spec, **kwargs), embed_models=self._embed_models,
                          target=self._target, param_kwargs=kwargs, callback_manager=self.callback_manager)

    # -- entry points ---------------------------------------------------------------------------------------
    @unspanned
    def retrieve(self, str_or_query_bundle: QueryType) -> List[NodeWithScore]:
        """LlamaIndex's ``retrieve`` (span, events, callbacks) when anything listens (``observed``); else the
        search alone: the same nodes without the bookkeeping nobody reads."""
        if observed(core_retriever.dispatcher, self.callback_manager):
            return super().retrieve(str_or_query_bundle)
        return self._retrieve(_bundle(str_or_query_bundle))

    @unspanned
    async def aretrieve(self, str_or_query_bundle: QueryType) -> List[NodeWithScore]:
        """Async twin of :meth:`retrieve`."""
        if observed(core_retriever.dispatcher, self.callback_manager):
            return await super().aretrieve(str_or_query_bundle)
        return await self._aretrieve(_bundle(str_or_query_bundle))

    def retrieve_many(self, queries: Sequence[QueryType]) -> List[List[NodeWithScore]]:
        """:meth:`retrieve` for each query, searched together: one Milvus call per field (and per feedback round, per
        fetch) for all of them (``nq = len(queries)``). The same nodes as one :meth:`retrieve` per query; when
        anything listens it is one :meth:`retrieve` per query, so every query gets its span and events."""
        bundles = _bundles(queries)
        if observed(core_retriever.dispatcher, self.callback_manager):
            return [self.retrieve(b) for b in bundles]
        return self._retrieve_many(bundles)

    async def aretrieve_many(self, queries: Sequence[QueryType]) -> List[List[NodeWithScore]]:
        """Async twin of :meth:`retrieve_many`."""
        bundles = _bundles(queries)
        if observed(core_retriever.dispatcher, self.callback_manager):
            return list(await asyncio.gather(*(self.aretrieve(b) for b in bundles)))
        return await self._aretrieve_many(bundles)

    def rank_many(self, queries: Sequence[QueryType]) -> List[Ranking]:
        """The kept candidates' ids and scores per query, searched together as in :meth:`retrieve_many` but reading
        no text (ids and scores only); :meth:`nodes_for` then makes nodes of the candidates a caller keeps. For
        wrappers that fuse several searches (``ConversationalRetriever``) and need a few texts, not every list's.
        Model reranking, which needs the texts, is not applied."""
        return self._rankings(_bundles(queries), lean=True)

    async def arank_many(self, queries: Sequence[QueryType]) -> List[Ranking]:
        """Async twin of :meth:`rank_many`."""
        return await self._arankings(_bundles(queries), lean=True)

    def nodes_for(self, wanted: Sequence[Tuple[Ranking, Sequence[str]]]) -> List[Dict[str, NodeWithScore]]:
        """Per ``(ranking, keys)``, the nodes of those kept candidates by key, with that ranking's score and trail;
        one ``get`` fetches every field a ranking does not hold (none when it holds them all)."""
        rows = self._fetch_rows(self._unknown(wanted))
        return [self._nodes_by_key(ranking, keys, rows) for ranking, keys in wanted]

    async def anodes_for(self, wanted: Sequence[Tuple[Ranking, Sequence[str]]]) -> List[Dict[str, NodeWithScore]]:
        """Async twin of :meth:`nodes_for`."""
        rows = await self._afetch_rows(self._unknown(wanted))
        return [self._nodes_by_key(ranking, keys, rows) for ranking, keys in wanted]

    # -- pure helpers shared by sync and async ----------------------------------------------------------------
    def _dense_fields_to_embed(self) -> List[str]:
        return [f for f in self._params.search_fields if f not in self._spec.bm25_fields]

    def _requests(self, queries: Sequence[QueryBundle], vectors: Sequence[Mapping[str, List[float]]],
                  limit: int) -> List[FieldRequest]:
        """One request per searched field, carrying every query's data (raw text for BM25, else its vector)."""
        out = []
        for f in self._params.search_fields:
            if f in self._spec.bm25_fields:
                data: List[Any] = [q.query_str for q in queries]
            else:
                data = [v[f] for v in vectors]
            out.append(FieldRequest(f, data, limit, self._params.search_params[f]))
        return out

    def _plan(self) -> Tuple[str, int]:
        """``("single" | "server_rrf" | "client", per-field limit)``."""
        p = self._params
        if len(p.search_fields) == 1:
            return "single", p.candidates()
        kind, _ = p.fusion()
        if kind == "rrf" and not p.explain:
            return "server_rrf", p.fusion_depth
        return "client", p.fusion_depth

    def _lean(self, plan: str) -> bool:
        """Whether the per-field searches return ids and scores only, the kept candidates' fields being fetched
        afterwards in one ``get``: client fusion reads ``fusion_depth`` hits per field but keeps ``candidates()``,
        and decoding every hit's text costs more than the extra round trip."""
        return plan == "client" and self._params.fusion_depth > self._params.candidates()

    @staticmethod
    def _lists(per_field: Sequence[Any]) -> Tuple[Dict[str, Any], List[List[Tuple[str, float]]]]:
        """Primary keys by their string key, and per hit list the ranked ``(key, score)`` pairs."""
        pks: Dict[str, Any] = {}
        lists: List[List[Tuple[str, float]]] = []
        for hits in per_field:
            keys = [str(pk) for pk in hits.ids]
            pks.update(zip(keys, hits.ids))
            lists.append(list(zip(keys, map(float, hits.distances))))
        return pks, lists

    @staticmethod
    def _per_query(results: Sequence[Any], n: int) -> List[List[Any]]:
        """Per query, its hit list of each search (``results`` = one Milvus result of ``n`` queries per search)."""
        return [[res[i] for res in results] for i in range(n)]

    @staticmethod
    def _one_by_one(reqs: Sequence[FieldRequest], n: int) -> List[List[FieldRequest]]:
        """Per query, its own requests. Server-side RRF runs one ``hybrid_search`` per query: Milvus Lite fused the
        lists of every query after the first with wrong ranks when one call carried several
        (``tests/retrievers/test_milvus_hybrid.py``)."""
        return [[FieldRequest(r.field, [r.data[i]], r.limit, r.param) for r in reqs] for i in range(n)]

    def _fuse(self, lists: List[List[Tuple[str, float]]]) -> Tuple[List[Tuple[Any, float]], str]:
        """Client-side fusion of the per-field lists; a list past the searched fields is the feedback search, which
        takes half of its dense field's weight."""
        p, spec = self._params, self._spec
        kind, fparams = p.fusion()
        if kind == "rrf":
            return fusion.rrf(lists, k=fparams["k"]), f"fusion:{kind}"
        weights = list(fparams["weights"])
        ups = [spec.fields_by_name[f].higher_is_better for f in p.search_fields]
        if len(lists) > len(weights) and p.feedback is not None:
            pos = p.search_fields.index(p.feedback.field)
            weights[pos] /= 2
            weights.append(weights[pos])
            ups.append(ups[pos])
        return fusion.weighted(lists, weights, ups), f"fusion:{kind}"

    def _rank(self, plan: str, pks: Mapping[str, Any], lists: List[List[Tuple[str, float]]]) -> Ranking:
        """Fuse the per-field ranked lists (:meth:`_lists`; or take the single / server-fused list) and keep the
        candidates, with each kept id's per-field rank and score for the trail. Reads no output field. A list past
        the searched fields is the feedback search (trail stage ``feedback:<field>``)."""
        p, spec = self._params, self._spec
        stage: Optional[str] = None
        if plan == "single":
            fused = lists[0]
        elif plan == "server_rrf":
            fused, stage = lists[0], "fusion:rrf"
        else:
            fused, stage = self._fuse(lists)
        kept = fused[: p.candidates()]
        stages: List[Tuple[str, Dict[str, Tuple[int, float]]]] = []
        if plan != "server_rrf":
            labels = [stage_label(spec, f) for f in p.search_fields]
            if len(lists) > len(labels) and p.feedback is not None:
                labels.append(f"feedback:{p.feedback.field}")
            for label, ranked in zip(labels, lists):
                at = dict(zip([k for k, _ in ranked], range(len(ranked))))  # key -> index (the last, if repeated)
                stages.append((label, {key: (at[key] + 1, ranked[at[key]][1]) for key, _ in kept if key in at}))
        return Ranking(kept=kept, pks={key: pks[key] for key, _ in kept}, stages=stages, fused_stage=stage)

    def _rankings_of(self, plan: str, lean: bool, per_query: Sequence[Sequence[Any]],
                     lists: Sequence[Tuple[Dict[str, Any], List[List[Tuple[str, float]]]]]) -> List[Ranking]:
        """One :class:`Ranking` per query; with the fields its hits carried unless the search was lean."""
        out = []
        for hits, (pks, ranked) in zip(per_query, lists):
            r = self._rank(plan, pks, ranked)
            out.append(r if lean else replace(r, entities=known_entities(hits, r.pks)))
        return out

    def _feedback_ids(self, plan: str, pks: Mapping[str, Any], lists: List[List[Tuple[str, float]]]) -> List[Any]:
        """Primary keys of the best fused hits of the first round (empty when feedback is off or nothing hit)."""
        fb = self._params.feedback
        if fb is None or plan != "client":
            return []
        fused, _ = self._fuse(lists)
        return [pks[key] for key, _ in fused[: fb.docs]]

    @staticmethod
    def _union(id_lists: Sequence[Sequence[Any]]) -> List[Any]:
        """The distinct primary keys of several lists, in first-seen order."""
        return list(dict.fromkeys(i for ids in id_lists for i in ids))

    def _feedback_request(self, reqs: Sequence[FieldRequest], asked: Sequence[int],
                          id_lists: Sequence[Sequence[Any]], rows: Sequence[Mapping[str, Any]]) -> FieldRequest:
        """The dense request of the queries ``asked`` (indices), each query moved towards its feedback vectors (in the
        order of its ids; ids Milvus no longer has are skipped)."""
        fb = self._params.feedback
        by_id = {str(r[self._spec.primary_field]): r[fb.field] for r in rows}
        r = reqs[self._params.search_fields.index(fb.field)]
        moved = [feedback_vector(r.data[i], [by_id[str(x)] for x in id_lists[i] if str(x) in by_id], fb.weight)
                 for i in asked]
        return FieldRequest(r.field, moved, r.limit, r.param)

    def _with_feedback(self, asked: Sequence[int], per_query: List[List[Any]],
                       lists: Sequence[Tuple[Dict[str, Any], List[List[Tuple[str, float]]]]], res: Any) -> None:
        """Add each asked query's feedback hits (``res``: one search of ``len(asked)`` queries), in place."""
        for n, i in enumerate(asked):
            per_query[i].append(res[n])
            more_pks, more = self._lists([res[n]])
            lists[i][0].update(more_pks)
            lists[i][1].extend(more)

    @staticmethod
    def _unknown(wanted: Sequence[Tuple[Ranking, Sequence[str]]]) -> List[Any]:
        return MilvusHybridRetriever._union([ranking.unknown(keys) for ranking, keys in wanted])

    def _fetched(self, rows: Sequence[Mapping[str, Any]]) -> Dict[str, Mapping[str, Any]]:
        return {str(row[self._spec.primary_field]): row for row in rows}

    def _nodes_by_key(self, ranking: Ranking, keys: Sequence[str],
                      rows: Mapping[str, Mapping[str, Any]]) -> Dict[str, NodeWithScore]:
        """Nodes with their trails for kept candidates (one deleted since the search has no row: skipped)."""
        out: Dict[str, NodeWithScore] = {}
        held = ranking.entities if ranking.entities is not None else {}
        for key in keys:
            entity = held.get(key, rows.get(key))
            if entity is None:
                continue
            nws = NodeWithScore(node=node_from_entity(self._spec, ranking.pks[key], entity), score=ranking.score(key))
            out[key] = add_stages(nws, ranking.trail(key))
        return out

    @staticmethod
    def _kept(rankings: Sequence[Ranking]) -> List[Tuple[Ranking, List[str]]]:
        return [(r, [k for k, _ in r.kept]) for r in rankings]

    def _finish_rerank(self, reranked: List[NodeWithScore]) -> List[NodeWithScore]:
        ordered = sorted(reranked, key=lambda n: -(n.score if n.score is not None else float("-inf")))
        for rank, nws in enumerate(ordered, start=1):
            trail = get_trail(nws)
            if not trail or trail[-1]["stage"] != "rerank":  # our ModelRerank records its own stage
                add_stage(nws, "rerank", rank, nws.score)
        return ordered[: self._params.similarity_top_k]

    # -- the Milvus calls, once: a generator that yields them and the two drivers below ----------------------
    def _search_calls(self, plan: str, reqs: Sequence[FieldRequest], out: List[str], n: int) -> List[MilvusCall]:
        """One call per field (or per query, server-fused with ``RRFRanker``)."""
        expr = self._params.filter_expr
        if plan == "server_rrf":
            _, fparams = self._params.fusion()
            return [MilvusCall("hybrid_search", (self._collection_name, [r.ann(expr) for r in one],
                                                 RRFRanker(fparams["k"])),
                               {"limit": self._params.candidates(), "output_fields": out})
                    for one in self._one_by_one(reqs, n)]
        return [self._search_call(r, out) for r in reqs]

    def _search_call(self, r: FieldRequest, out: List[str]) -> MilvusCall:
        return MilvusCall("search", (self._collection_name,), {
            "data": r.data, "anns_field": r.field, "limit": r.limit, "search_params": r.param,
            "filter": self._params.filter_expr, "output_fields": out})

    def _ranking_steps(self, queries: Sequence[QueryBundle], vectors: Sequence[Mapping[str, List[float]]],
                       lean: bool) -> MilvusSteps:
        """Search (one call per field), fuse, and with client-side feedback one ``get`` then one more ``search``."""
        plan, limit = self._plan()
        reqs = self._requests(queries, vectors, limit)
        out = [] if lean else self._output_fields
        n = len(queries)
        results = yield self._search_calls(plan, reqs, out, n)
        per_query = [[res[0]] for res in results] if plan == "server_rrf" else self._per_query(results, n)
        lists = [self._lists(hits) for hits in per_query]
        id_lists = [self._feedback_ids(plan, pks, ranked) for pks, ranked in lists]  # empty unless client feedback
        asked = [i for i, ids in enumerate(id_lists) if ids]
        if asked:
            [rows] = yield [MilvusCall("get", (self._collection_name,), {
                "ids": self._union(id_lists), "output_fields": [self._params.feedback.field]})]
            [res] = yield [self._search_call(self._feedback_request(reqs, asked, id_lists, rows), out)]
            self._with_feedback(asked, per_query, lists, res)
        return self._rankings_of(plan, lean, per_query, lists)

    def _fetch_steps(self, pks: List[Any]) -> MilvusSteps:
        """One ``get`` of the kept candidates' fields (none when there are none)."""
        if not pks:
            return {}
        [rows] = yield [MilvusCall("get", (self._collection_name,), {"ids": pks, "output_fields": self._output_fields})]
        return self._fetched(rows)

    # -- sync -------------------------------------------------------------------------------------------------
    def _embed_plan(self, query: QueryBundle) -> Tuple[Dict[str, List[float]], Dict[int, List[str]]]:
        """The vectors known already (the bundle's embedding, when every dense field has the same model) and the
        fields still to embed, grouped by model: a query is embedded once per distinct model, not once per field."""
        fields = self._dense_fields_to_embed()
        models = {id(self._embed_models[f]) for f in fields}
        if query.embedding is not None and len(models) == 1:
            return {f: list(query.embedding) for f in fields}, {}
        groups: Dict[int, List[str]] = {}
        for f in fields:
            groups.setdefault(id(self._embed_models[f]), []).append(f)
        return {}, groups

    def _embed(self, query: QueryBundle) -> Dict[str, List[float]]:
        vectors, groups = self._embed_plan(query)
        for fields in groups.values():
            vector = self._embed_models[fields[0]].get_query_embedding(query.query_str)
            vectors.update({f: vector for f in fields})
        return vectors

    def _drive(self, steps: MilvusSteps) -> Any:
        return drive(self._client, steps)

    def _fetch_rows(self, pks: List[Any]) -> Dict[str, Mapping[str, Any]]:
        return self._drive(self._fetch_steps(pks))

    def _rankings(self, queries: Sequence[QueryBundle], lean: bool) -> List[Ranking]:
        return self._drive(self._ranking_steps(queries, [self._embed(q) for q in queries], lean))

    def _retrieve_many(self, queries: Sequence[QueryBundle]) -> List[List[NodeWithScore]]:
        rankings = self._rankings(queries, self._lean(self._plan()[0]))
        nodes = [list(found.values()) for found in self.nodes_for(self._kept(rankings))]
        if self._params.ranker_type != "model":
            return nodes
        model = self._params.ranker_params["model"]
        return [self._finish_rerank(model.postprocess_nodes(found, query_bundle=q)) for found, q in zip(nodes, queries)]

    @unspanned
    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        return self._retrieve_many([query_bundle])[0]

    # -- async ------------------------------------------------------------------------------------------------
    def _async_client(self) -> Any:
        """One ``AsyncMilvusClient`` per running event loop (needs ``target``)."""
        return self._aclients.get()

    async def _aembed(self, query: QueryBundle) -> Dict[str, List[float]]:
        vectors, groups = self._embed_plan(query)
        found = await asyncio.gather(*(self._embed_models[fields[0]].aget_query_embedding(query.query_str)
                                       for fields in groups.values()))
        for fields, vector in zip(groups.values(), found):
            vectors.update({f: vector for f in fields})
        return vectors

    async def _adrive(self, steps: MilvusSteps) -> Any:
        return await adrive(self._aclients.get(), steps)

    async def _afetch_rows(self, pks: List[Any]) -> Dict[str, Mapping[str, Any]]:
        return await self._adrive(self._fetch_steps(pks))

    async def _arankings(self, queries: Sequence[QueryBundle], lean: bool) -> List[Ranking]:
        vectors = await asyncio.gather(*(self._aembed(q) for q in queries))
        return await self._adrive(self._ranking_steps(queries, vectors, lean))

    async def _aretrieve_many(self, queries: Sequence[QueryBundle]) -> List[List[NodeWithScore]]:
        rankings = await self._arankings(queries, self._lean(self._plan()[0]))
        nodes = [list(found.values()) for found in await self.anodes_for(self._kept(rankings))]
        if self._params.ranker_type != "model":
            return nodes
        model = self._params.ranker_params["model"]
        return list(await asyncio.gather(*(self._areranked(model, found, q) for found, q in zip(nodes, queries))))

    async def _areranked(self, model: Any, nodes: List[NodeWithScore], query: QueryBundle) -> List[NodeWithScore]:
        return self._finish_rerank(await model.apostprocess_nodes(nodes, query_bundle=query))

    @unspanned
    async def _aretrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        return (await self._aretrieve_many([query_bundle]))[0]
