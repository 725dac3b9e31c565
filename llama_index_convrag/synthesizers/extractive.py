"""Extractive: answer without an LLM with the retrieved sentences that best answer the question.

Every chunk is split into sentences (English and Chinese punctuation; table rows, headings and list items on their
own: see ``sentences.py``); each is scored by the question's terms it holds (or its predecessor's, at half), the
evidence of the answer type asked for (a date, an amount, a name, an option line), its passage's rank, and, for the
best few by those scores, the embedding similarity with the question (``embed_model``). The sentences near the best
(a share of its score that is higher for a factoid question than for one asking for an account), at most
``max_sentences`` within ``max_tokens`` and above ``similarity_cutoff``, are returned in document order, each run from
one source followed by its marker ``[n]``, numbered as ``citations=True`` numbers sources, so
``response.metadata["citations"]`` maps markers to nodes.

``rules`` (:class:`~llama_index_convrag.synthesizers.answer_rules.AnswerRules`) holds every weight and share of the
scoring and the cue phrases of the answer types. ``embed_model`` defaults to :class:`~llama_index_convrag.embeddings.LocalMiniLMEmbedding` (offline, the ``local``
extra); pass the index's embedding model to score with the same model that retrieved.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar, Dict, List, Optional, Tuple

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import MetadataMode

from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError
from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding
from llama_index_convrag.synthesizers import citations as cite
from llama_index_convrag.synthesizers import sentences as S
from llama_index_convrag.synthesizers.answer_rules import DEFAULT_ANSWER_RULES, AnswerRules
from llama_index_convrag.synthesizers.base import BaseSynthesizer, RunState, Steps, SynthesizerConfig
from llama_index_convrag.synthesizers.calls import EmbedRequest
from llama_index_convrag.synthesizers.types import ResponseMode

DEFAULT_MAX_SENTENCES = 3

Embeddings = Tuple[List[float], List[List[float]]]


def default_embed_model() -> BaseEmbedding:
    """The documented default: the local MiniLM model (its ONNX session loads on first use)."""
    return LocalMiniLMEmbedding()


def _above(indexes: List[int], similarity: List[float], cutoff: float) -> Tuple[List[int], List[float]]:
    kept = [(i, s) for i, s in zip(indexes, similarity) if s >= cutoff]
    return [i for i, _ in kept], [s for _, s in kept]


class Extractive(BaseSynthesizer):
    """No LLM: the ``max_sentences`` sentences closest to the query, in document order, with ``[n]`` markers."""

    mode = ResponseMode.EXTRACTIVE.value
    requires_llm = False
    uses_embed_model: ClassVar[bool] = True
    metadata_mode: ClassVar[MetadataMode] = MetadataMode.NONE  # quote the text, never its metadata header

    def __init__(
        self,
        embed_model: Optional[BaseEmbedding] = None,
        *,
        max_sentences: int = DEFAULT_MAX_SENTENCES,
        max_tokens: Optional[int] = None,
        similarity_cutoff: Optional[float] = None,
        citations: bool = True,
        embed_cap: Optional[int] = None,
        rules: Optional[AnswerRules] = None,
        **common: Any,
    ) -> None:
        if not isinstance(max_sentences, int) or max_sentences < 1:
            raise ConfigurationError(f"max_sentences must be an int >= 1, got {max_sentences!r}")
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise ConfigurationError(f"max_tokens must be None or an int >= 1, got {max_tokens!r}")
        if embed_cap is not None and (not isinstance(embed_cap, int) or embed_cap < 1):
            raise ConfigurationError(f"embed_cap must be None or an int >= 1, got {embed_cap!r}")
        if rules is not None and not isinstance(rules, AnswerRules):
            raise ArgumentTypeError(f"rules must be an AnswerRules, got {type(rules).__name__}")
        if not citations:
            raise ConfigurationError("extractive answers always cite their sources; citations=False is not supported")
        if common.get("output_cls") is not None:
            raise ConfigurationError("extractive answers are quoted text; output_cls needs an LLM mode")
        if embed_model is not None and not isinstance(embed_model, BaseEmbedding):
            raise ArgumentTypeError(f"embed_model must be a llama_index BaseEmbedding, got {type(embed_model).__name__}")
        super().__init__(None, citations=True, **common)
        self._embed_model = embed_model if embed_model is not None else default_embed_model()
        self._max_sentences = max_sentences
        self._max_tokens = max_tokens
        self._similarity_cutoff = similarity_cutoff
        rules = DEFAULT_ANSWER_RULES if rules is None else rules
        self.rules = rules if embed_cap is None else replace(rules, embed_cap=embed_cap)

    @classmethod
    def config_kwargs(cls, config: SynthesizerConfig) -> Dict[str, Any]:
        kwargs = super().config_kwargs(config)
        kwargs.pop("citations")  # always on
        return {**kwargs, "embed_model": config.embed_model}

    @classmethod
    def from_config(cls, config: SynthesizerConfig) -> "Extractive":
        return cls(**cls.config_kwargs(config))  # an llm given to the factory is not used (as no_text's)

    def _prepare_chunks(self, chunks: List[str]) -> List[str]:
        # markers are added to the chosen sentences, not to the chunks; a footnote quoted from a chunk is neutralised
        return cite.source_texts(chunks)

    def _steps(self, run: RunState, chunks: List[str]) -> Steps:
        candidates = S.sentences_of(chunks)
        if not candidates:
            return self._empty_response
        question = S.question_of(run.query_str, self.rules)
        overlap = S.overlaps(question, candidates)
        cheap = S.cheap_scores(question, candidates, overlap)
        short = S.shortlist(cheap, self.rules.embed_cap, S.reserved(question, candidates))
        query_vector, vectors = yield EmbedRequest(
            run.query_str, [S.embed_text(candidates[i].text, self.rules) for i in short]
        )
        similarity = S.cosine(query_vector, vectors)
        if self._similarity_cutoff is not None:
            short, similarity = _above(short, similarity, self._similarity_cutoff)
        scores = {i: cheap[i] + self.rules.w_embed * sim for i, sim in zip(short, similarity)}
        short = S.with_evidence(question, candidates, short)
        scores = [scores[i] for i in short]
        kept = S.near_best(scores, shares=[S.keep_share(question, overlap[i] > 0) for i in short])
        short, scores = [short[j] for j in kept], [scores[j] for j in kept]
        lengths = [self.count_tokens(candidates[i].text) for i in short]
        chosen = [short[j] for j in S.select(scores, lengths, self._max_sentences, self._max_tokens)]
        if not chosen:
            return self._empty_response
        return S.compose([candidates[i] for i in S.with_neighbour(candidates, chosen)])

    def _call(self, run: RunState, request: Any) -> Embeddings:
        return self._embed_model.get_query_embedding(request.query), self._embed_model.get_text_embedding_batch(
            request.texts
        )

    async def _acall(self, run: RunState, request: Any) -> Embeddings:
        query = await self._embed_model.aget_query_embedding(request.query)
        return query, await self._embed_model.aget_text_embedding_batch(request.texts)
