"""``ConvRAGIndex``: a ``VectorStoreIndex`` over one Milvus collection whose retriever is ``MilvusHybridRetriever``.

Build it explicitly with :meth:`ConvRAGIndex.from_collection` (existing collection; reads the schema),
:meth:`ConvRAGIndex.from_vector_store` (the collection of a vector store: ours, or LlamaIndex's ``MilvusVectorStore``)
or :meth:`ConvRAGIndex.from_documents` (creates the collection in our layout if missing, then inserts); ``__init__``
only stores built parts. LlamaIndex ``insert`` / ``delete_ref_doc`` go through :class:`ConvRAGMilvusStore` on our
layout, through the vector store given on another.
"""

from __future__ import annotations

import inspect
from typing import Any, Dict, List, Optional, Sequence, Tuple

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks import CallbackManager
from llama_index.core.chat_engine.types import BaseChatEngine
from llama_index.core.indices.vector_store.base import VectorStoreIndex
from llama_index.core.query_engine.retriever_query_engine import RetrieverQueryEngine
from llama_index.core.schema import Document, TransformComponent
from llama_index.core.storage.storage_context import StorageContext
from llama_index.core.vector_stores.types import BasePydanticVectorStore
from pymilvus import MilvusClient

from llama_index_convrag.config.embedding import configured_embed_model
from llama_index_convrag.config.llm import configured_llm
from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError
from llama_index_convrag.chat.factory import UNSET, build_chat_engine
from llama_index_convrag.judge.options import judge_options, refuse_old_keywords
from llama_index_convrag.judge.query_engine import build_judge_synthesizer
from llama_index_convrag.ingest.chunking import build_splitter
from llama_index_convrag.milvus.client import MilvusTarget
from llama_index_convrag.milvus.schema import CollectionSpec, create_collection, default_spec, detect_spec, open_client
from llama_index_convrag.milvus.vector_store import ConvRAGMilvusStore
from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever
from llama_index_convrag.synthesizers import get_response_synthesizer

ENGINE_KWARGS = frozenset(inspect.signature(RetrieverQueryEngine.__init__).parameters) - {
    "self", "retriever", "callback_manager"}
"""``as_query_engine`` arguments that go to ``RetrieverQueryEngine`` (``response_synthesizer``,
``node_postprocessors``), read from its signature."""


def store_collection(vector_store: Any) -> Tuple[MilvusClient, str]:
    """``(client, collection name)`` of a Milvus vector store (ours, or one with a ``MilvusClient`` as ``client`` and a
    ``collection_name``, as LlamaIndex's ``MilvusVectorStore``); names the type it got otherwise."""
    client, name = getattr(vector_store, "client", None), getattr(vector_store, "collection_name", None)
    if not isinstance(client, MilvusClient) or not isinstance(name, str):
        raise ConfigurationError(
            "from_vector_store reads a Milvus collection: pass a ConvRAGMilvusStore or LlamaIndex's MilvusVectorStore "
            f"(a MilvusClient as .client and a .collection_name), got {type(vector_store).__name__}")
    return client, name


class ConvRAGIndex(VectorStoreIndex):
    """Vector index over a Milvus collection (ours or an auto-detected LlamaIndex / langchain-milvus one)."""

    def __init__(
        self,
        *,
        client: MilvusClient,
        collection_name: str,
        spec: CollectionSpec,
        embed_model: BaseEmbedding,
        target: Optional[MilvusTarget] = None,
        callback_manager: Optional[CallbackManager] = None,
        transformations: Optional[List[TransformComponent]] = None,
        show_progress: bool = False,
        vector_store: Optional[BasePydanticVectorStore] = None,
    ) -> None:
        """``vector_store``: what ``insert`` writes through on a collection that is not in our layout (our layout is
        always written by :class:`ConvRAGMilvusStore`)."""
        self._client = client
        self._collection_name = collection_name
        self._spec = spec
        self._target = target
        store = ConvRAGMilvusStore(client=client, collection_name=collection_name, spec=spec) \
            if spec.layout == "convrag" else vector_store
        storage = StorageContext.from_defaults(vector_store=store) if store is not None else None
        super().__init__(nodes=[], embed_model=embed_model, storage_context=storage,
                         callback_manager=callback_manager, transformations=transformations,
                         show_progress=show_progress)

    # -- construction -----------------------------------------------------------------------------------------
    @classmethod
    def from_collection(
        cls,
        collection_name: str,
        *,
        embed_model: BaseEmbedding,
        client: Optional[MilvusClient] = None,
        target: Optional[MilvusTarget] = None,
        spec: Optional[CollectionSpec] = None,
        callback_manager: Optional[CallbackManager] = None,
    ) -> "ConvRAGIndex":
        """An index over an existing collection; the layout is read from its schema unless ``spec`` is given."""
        client = open_client(client, target)
        spec = detect_spec(client, collection_name) if spec is None else spec
        return cls(client=client, collection_name=collection_name, spec=spec, embed_model=embed_model,
                   target=target, callback_manager=callback_manager)

    @classmethod
    def from_vector_store(  # type: ignore[override]
        cls,
        vector_store: BasePydanticVectorStore,
        embed_model: Optional[BaseEmbedding] = None,
        *,
        callback_manager: Optional[CallbackManager] = None,
        transformations: Optional[List[TransformComponent]] = None,
        show_progress: bool = False,
    ) -> "ConvRAGIndex":
        """An index over the collection ``vector_store`` stores in: our :class:`ConvRAGMilvusStore`, or LlamaIndex's
        ``MilvusVectorStore`` (its client and collection; the layout read from the schema, so our hybrid retriever
        searches it). Core's signature; ``embed_model``: the one given, else one assigned to ``Settings.embed_model``,
        else ``CONVRAG_EMBED_MODEL`` / the local model (``config.embedding.configured_embed_model``)."""
        client, name = store_collection(vector_store)
        spec = vector_store.spec if isinstance(vector_store, ConvRAGMilvusStore) else detect_spec(client, name)
        return cls(client=client, collection_name=name, spec=spec, embed_model=configured_embed_model(embed_model),
                   callback_manager=callback_manager, transformations=transformations, show_progress=show_progress,
                   vector_store=vector_store)

    @classmethod
    def from_documents(  # type: ignore[override]
        cls,
        documents: Sequence[Document],
        *,
        collection_name: str,
        embed_model: BaseEmbedding,
        client: Optional[MilvusClient] = None,
        target: Optional[MilvusTarget] = None,
        transformations: Optional[List[TransformComponent]] = None,
        analyzer: str = "english",
        dense_index: Optional[Dict[str, Any]] = None,
        callback_manager: Optional[CallbackManager] = None,
        show_progress: bool = False,
    ) -> "ConvRAGIndex":
        """Create the collection (our layout) if missing, split, embed and insert ``documents``."""
        client = open_client(client, target)
        if client.has_collection(collection_name):
            spec = detect_spec(client, collection_name)
        else:
            dim = len(embed_model.get_text_embedding("dimension probe"))
            spec = default_spec(dim)
            create_collection(client, collection_name, spec, is_lite=target.is_lite if target else True,
                              analyzer=analyzer, dense_index=dense_index)
        if transformations is None:
            transformations = [build_splitter(embed_model)]  # chunks sized to the model's window
        index = cls(client=client, collection_name=collection_name, spec=spec, embed_model=embed_model,
                    target=target, callback_manager=callback_manager, transformations=transformations,
                    show_progress=show_progress)
        for doc in documents:
            index.insert(doc)
        return index

    # -- public parts -----------------------------------------------------------------------------------------
    @property
    def embed_model(self) -> BaseEmbedding:
        return self._embed_model

    @property
    def milvus_client(self) -> MilvusClient:
        return self._client

    @property
    def target(self) -> Optional[MilvusTarget]:
        return self._target

    @property
    def collection_name(self) -> str:
        return self._collection_name

    @property
    def spec(self) -> CollectionSpec:
        return self._spec

    # -- engines ----------------------------------------------------------------------------------------------
    def as_retriever(self, **kwargs: Any) -> MilvusHybridRetriever:  # type: ignore[override]
        """A :class:`MilvusHybridRetriever`; kwargs must be in ``MilvusHybridRetriever.KWARGS``."""
        unknown = sorted(set(kwargs) - MilvusHybridRetriever.KWARGS)
        if unknown:
            raise ArgumentTypeError(f"unknown retriever argument(s) {unknown}; accepted: {sorted(MilvusHybridRetriever.KWARGS)}")
        return MilvusHybridRetriever.from_defaults(
            collection_name=self._collection_name, embed_model=self._embed_model, client=self._client,
            target=self._target, spec=self._spec, callback_manager=self._callback_manager, **kwargs)

    def as_query_engine(self, **kwargs: Any) -> Any:  # type: ignore[override]
        """``RetrieverQueryEngine`` over :meth:`as_retriever`; needs ``llm=`` or ``response_synthesizer=``.

        Retriever kwargs are split off by ``MilvusHybridRetriever.KWARGS``; the rest are :data:`ENGINE_KWARGS` or
        arguments of our ``get_response_synthesizer``. The LLM: ``llm=``, else one assigned to ``Settings.llm`` (core's
        default-building getter is never called). ``judge``: ``True``, a ``BaseJudge`` or a
        :class:`~llama_index_convrag.judge.options.JudgeOptions`: judge-guided recursive retrieval
        (:mod:`llama_index_convrag.judge`), the search tree in ``response.metadata["judge_tree"]``.
        """
        synth_names = frozenset(inspect.signature(get_response_synthesizer).parameters) - {"callback_manager"}
        retriever_kwargs = {k: v for k, v in kwargs.items() if k in MilvusHybridRetriever.KWARGS}
        rest = {k: v for k, v in kwargs.items() if k not in MilvusHybridRetriever.KWARGS}
        refuse_old_keywords(rest)
        judging = judge_options(rest.pop("judge", None))
        unknown = sorted(set(rest) - ENGINE_KWARGS - synth_names)
        if unknown:
            raise ArgumentTypeError(f"unknown query engine argument(s) {unknown}; accepted: "
                            f"{sorted(ENGINE_KWARGS | synth_names | MilvusHybridRetriever.KWARGS | {'judge'})}")
        retriever = self.as_retriever(**retriever_kwargs)
        postprocessors = rest.pop("node_postprocessors", None)
        synth = rest.pop("response_synthesizer", None)
        if synth is None:
            rest["llm"] = configured_llm(rest.get("llm"))
            if rest["llm"] is None and rest.get("response_mode") != "no_text":
                raise ConfigurationError("as_query_engine needs llm= or response_synthesizer= (or an LLM assigned to "
                                 "Settings.llm; no default LLM is built)")
            synth = get_response_synthesizer(callback_manager=self._callback_manager, **rest) if judging is None \
                else build_judge_synthesizer(retriever, callback_manager=self._callback_manager, options=judging, **rest)
        elif judging is not None:
            raise ArgumentTypeError("response_synthesizer= excludes judge=: the judge builds its own synthesizers")
        elif rest:
            raise ArgumentTypeError(f"response_synthesizer= excludes {sorted(rest)}")
        return RetrieverQueryEngine(retriever=retriever, response_synthesizer=synth,
                                    node_postprocessors=postprocessors, callback_manager=self._callback_manager)

    def as_chat_engine(self, chat_mode: Optional[str] = None, llm: Any = UNSET,  # type: ignore[override]
                       **kwargs: Any) -> BaseChatEngine:
        """Our chat engine (``llama_index_convrag.chat.factory.build_chat_engine``) for ``chat_mode`` ``None`` /
        ``"condense_question"``, ``"condense_plus_context"`` (also core's ``"best"``) or ``"context"``; ``"simple"``:
        core's ``SimpleChatEngine``; other modes are refused. ``kwargs``: the engine's names
        (``llama_index_convrag.chat.options.AS_CHAT_ENGINE_NAMES``: ``retriever_kwargs`` (the arguments of
        :meth:`as_retriever`), ``node_postprocessors``, ``system_prompt``, ``condense_question_prompt``,
        ``chat_history``, ``memory``, ``conversation_store``, ``conversation_id``, ``rewrite``, ``answer``,
        ``budget``); any other is refused naming its place."""
        return build_chat_engine(self, chat_mode, llm, **kwargs)
