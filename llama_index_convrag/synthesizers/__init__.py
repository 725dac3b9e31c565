"""Response synthesizers: every LlamaIndex mode, with extra variables counted in the budget, structured answer
filtering for refine/compact/accumulate/compact_accumulate, early stop, citations and a mode registry."""

from llama_index_convrag.synthesizers.accumulate import Accumulate
from llama_index_convrag.synthesizers.base import BaseSynthesizer
from llama_index_convrag.synthesizers.calls import CallRequest, RunState
from llama_index_convrag.synthesizers.citations import number_chunks, parse_citations
from llama_index_convrag.synthesizers.config import SynthesizerConfig
from llama_index_convrag.synthesizers.events import SynthesisChunkSkippedEvent, SynthesisLLMCallEvent
from llama_index_convrag.synthesizers.compact_accumulate import CompactAndAccumulate
from llama_index_convrag.synthesizers.compact_and_refine import CompactAndRefine
from llama_index_convrag.synthesizers.context_only import ContextOnly
from llama_index_convrag.synthesizers.extractive import Extractive
from llama_index_convrag.synthesizers.factory import get_response_synthesizer
from llama_index_convrag.synthesizers.generation import Generation
from llama_index_convrag.synthesizers.no_text import NoText
from llama_index_convrag.synthesizers.refine import Refine
from llama_index_convrag.synthesizers.registry import register_mode, registered_modes, unregister_mode
from llama_index_convrag.synthesizers.simple_summarize import SimpleSummarize
from llama_index_convrag.synthesizers.structured import StructuredRefineResponse
from llama_index_convrag.synthesizers.tree_summarize import TreeSummarize
from llama_index_convrag.synthesizers.types import ResponseMode

for _mode, _cls in (
    (ResponseMode.REFINE, Refine),
    (ResponseMode.COMPACT, CompactAndRefine),
    (ResponseMode.TREE_SUMMARIZE, TreeSummarize),
    (ResponseMode.SIMPLE_SUMMARIZE, SimpleSummarize),
    (ResponseMode.ACCUMULATE, Accumulate),
    (ResponseMode.COMPACT_ACCUMULATE, CompactAndAccumulate),
    (ResponseMode.GENERATION, Generation),
    (ResponseMode.NO_TEXT, NoText),
    (ResponseMode.CONTEXT_ONLY, ContextOnly),
    (ResponseMode.EXTRACTIVE, Extractive),
):
    register_mode(_mode, _cls)

__all__ = [
    "Accumulate",
    "BaseSynthesizer",
    "CallRequest",
    "CompactAndAccumulate",
    "CompactAndRefine",
    "ContextOnly",
    "Extractive",
    "Generation",
    "NoText",
    "Refine",
    "ResponseMode",
    "RunState",
    "SimpleSummarize",
    "StructuredRefineResponse",
    "SynthesisChunkSkippedEvent",
    "SynthesisLLMCallEvent",
    "SynthesizerConfig",
    "TreeSummarize",
    "get_response_synthesizer",
    "number_chunks",
    "parse_citations",
    "register_mode",
    "registered_modes",
    "unregister_mode",
]
