"""Instrumentation events of the synthesizers (``llama_index.core.instrumentation``)."""

from llama_index.core.instrumentation.events import BaseEvent


class SynthesisLLMCallEvent(BaseEvent):
    """One LLM call made by a synthesizer."""

    mode: str
    call_index: int
    prompt_tokens: int
    structured: bool = False

    @classmethod
    def class_name(cls) -> str:
        return "SynthesisLLMCallEvent"


class SynthesisChunkSkippedEvent(BaseEvent):
    """A structured reply could not be parsed; its chunk was skipped."""

    mode: str
    call_index: int
    error: str

    @classmethod
    def class_name(cls) -> str:
        return "SynthesisChunkSkippedEvent"
