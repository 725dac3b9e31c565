"""Our ``BaseSynthesizer``: a subclass of core's (``super().__init__`` sets core's state) that drives every mode.

Template method: the base drives, a mode supplies its steps. A mode writes one generator, ``_steps(run, chunks)``,
that *yields* LLM call requests (one, or a list that may run in parallel) and *returns* the answer; a sync and an
async driver execute the same generator, so every mode's logic exists once for ``get_response`` and
``aget_response`` (and, for ``multimodal=True``, ``get_response_from_messages``: the chunks are then messages).
The drivers count calls and prompt tokens, skip and report unparsable structured replies, and stream when asked.

``synthesize`` / ``asynthesize`` keep core's contract (events, callback, empty input, response types) and are
written here rather than inherited because they also check the extra variables before any call, answer from the
query alone where the mode does (generation), and build the response ``metadata`` ledger: core's
``{node_id: node.metadata}`` entries plus ``llm_calls``, ``prompt_tokens`` (every prompt sent, counted with the
packing tokenizer), ``skipped_chunks``, ``unused_variables`` and, when enabled, ``citations`` and ``llm_calls_saved``.

Prompts live in named attributes of each mode (``self._text_qa_template``, ...) behind ``_get_prompts`` /
``_update_prompts``, as in core.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
import logging
from typing import (
    Any,
    AsyncGenerator,
    ClassVar,
    ContextManager,
    Dict,
    Generator,
    Iterable,
    List,
    Optional,
    Sequence,
    Tuple,
    Type,
)

from llama_index.core.async_utils import run_async_tasks
from llama_index.core.base.response.schema import (
    RESPONSE_TYPE,
    AsyncStreamingResponse,
    PydanticResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.bridge.pydantic import BaseModel, ValidationError
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.callbacks.schema import CBEventType, EventPayload
from llama_index.core.indices.prompt_helper import ChatPromptHelper, PromptHelper
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.synthesis import SynthesizeEndEvent, SynthesizeStartEvent
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.llms import LLM
from llama_index.core.prompts.utils import is_chat_model
from llama_index.core.prompts import BasePromptTemplate, SelectorPromptTemplate
from llama_index.core.prompts.prompt_utils import get_biggest_chat_prompt, get_biggest_prompt
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.response_synthesizers.base import BaseSynthesizer as CoreBaseSynthesizer
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, QueryType
from llama_index.core.settings import Settings
from llama_index.core.types import RESPONSE_TEXT_TYPE
from llama_index.core.utilities.token_counting import TokenCounter

from llama_index_convrag._scope import bound
from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError
from llama_index_convrag.instrumentation import emit, quiet_spans, span_when_observed
from llama_index_convrag.synthesizers import citations as cite
from llama_index_convrag.synthesizers.completion import COMPLETION_KEY, complete_answer
from llama_index_convrag.synthesizers.grounding import SupportScorer, cite_judged, grounding_of, passage_terms_of
from llama_index_convrag.synthesizers.stream_hold import GROUNDING_KEY, StreamHold, held_response
from llama_index_convrag.synthesizers.calls import (
    KNOWN_VARIABLES,
    CallRequest,
    RunState,
    Steps,
    template_variables,
)
from llama_index_convrag.synthesizers.config import DEFAULT_EMPTY_RESPONSE, SynthesizerConfig
from llama_index_convrag.synthesizers.resolve import NoLLM, helper_tokenizer, require_llm, resolve_prompt_helpers
from llama_index_convrag.synthesizers.events import SynthesisChunkSkippedEvent, SynthesisLLMCallEvent
from llama_index_convrag.synthesizers.packing import (
    TiktokenTokenizer,
    Tokenizer,
    context_budget,
    pack_texts,
    render_chunks,
)
from llama_index_convrag.synthesizers.streams import (
    agen_of,
    astrip_label_stream,
    gen_of,
    strip_answer_label,
    strip_label_stream,
)
from llama_index_convrag.synthesizers.structured import (
    ProgramFactory,
    arun_program,
    build_program,
    own_copy,
    run_program,
)

dispatcher = get_dispatcher(__name__)

# The run (ledger) of the synthesize call in progress: message-chunk methods called inside it, a compact mode's and
# then its base's, count into the same ledger.
_ACTIVE_RUN: ContextVar[Optional[RunState]] = ContextVar("convrag_synthesis_run", default=None)


def active_run(run: RunState) -> ContextManager[RunState]:
    """``run`` is the ledger every call counts into while the block runs (nested calls of one synthesize)."""
    return bound(_ACTIVE_RUN, run)
logger = logging.getLogger(__name__)

DEFAULT_PADDING = 5
TemplateDefaults = Dict[str, Tuple[BasePromptTemplate, BasePromptTemplate]]
Shape = Tuple[BasePromptTemplate, Dict[str, Any], int]  # a call's template, its context variables, its padding

__all__ = ["BaseSynthesizer", "CallRequest", "RunState", "Steps", "SynthesizerConfig", "DEFAULT_PADDING"]


def _default_of(template: BasePromptTemplate) -> BasePromptTemplate:
    """The template core's ``get_biggest_prompt`` measures: a selector's default (it formats with ``llm=None``)."""
    return template.select(llm=None) if isinstance(template, SelectorPromptTemplate) else template


def _template_of(shapes: Sequence[Shape], measured: Sequence[BasePromptTemplate],
                 picked: BasePromptTemplate) -> BasePromptTemplate:
    """The shape's template whose measured copy core's pick returned."""
    return next(shape[0] for shape, copy in zip(shapes, measured) if copy is picked)


class BaseSynthesizer(CoreBaseSynthesizer):
    """A LlamaIndex ``BaseSynthesizer`` whose prompts take extra variables that are counted when packing."""

    mode: ClassVar[str] = "custom"
    requires_llm: ClassVar[bool] = True
    supports_structured_filtering: ClassVar[bool] = False
    supports_early_stop: ClassVar[bool] = False
    uses_embed_model: ClassVar[bool] = False
    # keyword arguments of get_response/synthesize that are options of the mode, not template variables
    response_options: ClassVar[frozenset] = frozenset()
    # how a node's text is read for the prompt (core's choice: with the metadata the LLM should see)
    metadata_mode: ClassVar[MetadataMode] = MetadataMode.LLM
    # False: no nodes -> the empty response without any call; True: the mode answers from the query alone
    answers_without_nodes: ClassVar[bool] = False
    # role -> (default template, default with citations); each role is a keyword of __init__ and of the factory
    template_defaults: ClassVar[TemplateDefaults] = {}
    # role -> default template of citation_mode="aligned" where it is not the plain one (answered in the query's language)
    aligned_defaults: ClassVar[Dict[str, BasePromptTemplate]] = {}

    def __init__(
        self,
        llm: Optional[LLM] = None,
        *,
        callback_manager: Optional[CallbackManager] = None,
        prompt_helper: Optional[PromptHelper] = None,
        chat_prompt_helper: Optional[ChatPromptHelper] = None,
        streaming: bool = False,
        output_cls: Optional[Type[BaseModel]] = None,
        empty_response: str = DEFAULT_EMPTY_RESPONSE,
        multimodal: bool = False,
        citations: bool = False,
        citation_mode: str = cite.INLINE,
        verbose: bool = False,
        tokenizer: Optional[Tokenizer] = None,
        use_async: bool = False,
        structured_answer_filtering: bool = False,
        program_factory: Optional[ProgramFactory] = None,
        support_scorer: Optional[SupportScorer] = None,
        **templates: Optional[BasePromptTemplate],
    ) -> None:
        # Core's __init__ reads Settings.llm, whose getter builds a default OpenAI; ours takes the LLM it is given,
        # else one assigned to Settings.llm (resolve.py). A mode that calls no LLM, or whose calls all go through a
        # given program_factory, needs none.
        if self.requires_llm and program_factory is None:
            llm = require_llm(llm, type(self).__name__)
        if support_scorer is not None and not callable(support_scorer):
            raise ArgumentTypeError(f"support_scorer must be a callable (claim, passages) -> scores or None, "
                                    f"got {support_scorer!r}")
        self._support_scorer = support_scorer
        if not isinstance(empty_response, str):
            raise ConfigurationError(f"empty_response must be a str, got {empty_response!r}")
        if multimodal and (llm is None or not is_chat_model(llm)):
            raise ConfigurationError("Multimodal synthesis requires a chat LLM.")
        if multimodal and citations:
            raise ConfigurationError("citations=True is not supported with multimodal=True yet")
        prompt_helper, chat_prompt_helper = resolve_prompt_helpers(
            llm, prompt_helper, chat_prompt_helper, helper_tokenizer(tokenizer)
        )
        super().__init__(
            llm=llm if llm is not None else NoLLM(),  # never the Settings.llm getter (core's __init__ calls it for None)
            callback_manager=callback_manager if callback_manager is not None else Settings.callback_manager,
            prompt_helper=prompt_helper,
            chat_prompt_helper=chat_prompt_helper,
            streaming=streaming,
            output_cls=output_cls,
            empty_response=empty_response,
            multimodal=multimodal,
        )
        self._llm = llm  # type: ignore[assignment]  # None for modes that make no LLM call
        self._empty_response = empty_response  # core's ``empty_response or ...`` would lose an explicit ""
        # inline: the prompt numbers the chunks and asks for markers; aligned: plain prompt, markers added after
        # (a mode without an LLM call writes its own markers: aligned is inline there)
        self._aligned = cite.check_citation_mode(citation_mode) == cite.ALIGNED and citations and self.requires_llm
        self._citations = citations and not self._aligned
        self._verbose = verbose
        self._tokenizer: Tokenizer = tokenizer if tokenizer is not None else TiktokenTokenizer()
        self._use_async = use_async
        self._set_templates(templates)
        self._configure_filtering(structured_answer_filtering, program_factory)

    @property
    def citation_mode(self) -> Optional[str]:
        """How this synthesizer cites (``citations.CITATION_MODES``), None when it does not."""
        return cite.ALIGNED if self._aligned else cite.INLINE if self._citations else None

    def _set_templates(self, given: Dict[str, Optional[BasePromptTemplate]]) -> None:
        """Validate the template keywords; each mode assigns its named attributes in :meth:`_assign_templates`."""
        unknown = sorted(set(given) - set(self.template_defaults))
        if unknown:
            raise ArgumentTypeError(
                f"{type(self).__name__} got unknown keyword arguments {unknown}; its templates are "
                f"{sorted(self.template_defaults)}"
            )
        chosen = {}
        for role, (plain, cited) in self.template_defaults.items():
            template = given.get(role)
            default = cited if self._citations else self.aligned_defaults.get(role, plain) if self._aligned else plain
            chosen[role] = template if template is not None else default
        self._update_prompts(chosen)

    def _configure_filtering(self, enabled: bool, program_factory: Optional[ProgramFactory]) -> None:
        """Structured answer filtering: every call returns ``{query_satisfied, answer}`` (see ``structured.py``)."""
        if enabled and not self.supports_structured_filtering:
            raise ConfigurationError(f"{type(self).__name__} does not support structured_answer_filtering")
        if program_factory is not None and not enabled:
            raise ConfigurationError("program_factory needs structured_answer_filtering=True")
        if enabled and self._output_cls is not None:
            raise ConfigurationError("structured_answer_filtering cannot be combined with output_cls")
        self._structured = enabled
        self._program_factory = program_factory

    @classmethod
    def config_kwargs(cls, config: SynthesizerConfig) -> Dict[str, Any]:
        """The factory's arguments this class takes (extend to add mode options)."""
        templates = {role: getattr(config, role, None) for role in cls.template_defaults}
        return {**templates, **config.common()}

    @classmethod
    def from_config(cls, config: SynthesizerConfig) -> "BaseSynthesizer":
        """Build from the factory's arguments."""
        return cls(config.llm, **cls.config_kwargs(config))

    # prompts ---------------------------------------------------------------------------------
    # Each mode keeps its templates in named attributes, one per role of ``template_defaults`` (``text_qa_template``
    # lives in ``self._text_qa_template``, ...), as core's synthesizers do; the prompt keys are the roles.
    def __init_subclass__(cls, **kwargs: Any) -> None:
        quiet_spans(cls)  # a mode's get_response, prompt getters...: spanned only when a handler listens
        super().__init_subclass__(**kwargs)

    @span_when_observed(dispatcher)
    def _get_prompts(self) -> PromptDictType:
        """The mode's templates by role (none for a mode without an LLM call)."""
        return {role: getattr(self, f"_{role}") for role in self.template_defaults}

    @span_when_observed(dispatcher)
    def _update_prompts(self, prompts: PromptDictType) -> None:
        """Replace the templates of the roles in ``prompts``; other keys are ignored."""
        for role in self.template_defaults.keys() & prompts.keys():
            setattr(self, f"_{role}", prompts[role])

    @property
    def callback_manager(self) -> CallbackManager:
        return self._callback_manager

    @callback_manager.setter
    def callback_manager(self, callback_manager: CallbackManager) -> None:
        self._callback_manager = callback_manager
        if self._llm is not None:
            self._llm.callback_manager = callback_manager

    # validation ------------------------------------------------------------------------------
    def check_variables(self, extra_vars: Dict[str, Any]) -> List[str]:
        """Raise naming any template variable that is neither known nor supplied; return the unused extras."""
        clash = sorted(KNOWN_VARIABLES & set(extra_vars))
        if clash:
            raise ConfigurationError(f"extra variables {clash} are filled by the synthesizer itself; rename them")
        used: set = set()
        for name, template in self._get_prompts().items():
            names = template_variables(template)
            used.update(names)
            missing = [v for v in names if v not in KNOWN_VARIABLES and v not in extra_vars]
            if missing:
                raise ConfigurationError(
                    f"template {name!r} needs variable(s) {missing} that were not supplied; pass them as "
                    f"synthesize(query, nodes, {missing[0]}=...) or get_response(query, chunks, {missing[0]}=...)"
                )
        unused = sorted(set(extra_vars) - used)
        if unused:
            logger.info("extra variables %s are used by no template of %s", unused, type(self).__name__)
        return unused

    # budgeting -------------------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        return len(self._tokenizer.encode(text))

    def _format(self, template: BasePromptTemplate, kwargs: Dict[str, Any]) -> str:
        return template.format(llm=self._llm, **kwargs)

    def _prompt_tokens(self, template: BasePromptTemplate, kwargs: Dict[str, Any]) -> int:
        """Tokens of one filled prompt (messages with images are estimated as core estimates them)."""
        if self._multimodal:
            return TokenCounter().estimate_tokens_in_messages(template.format_messages(llm=self._llm, **kwargs))
        return self.count_tokens(self._format(template, kwargs))

    def _budget(self, run: RunState, shapes: Iterable[Shape]) -> int:
        """Context tokens per call: the window minus the biggest ``prompt + padding``, each prompt measured *with
        the query and the extra variables filled* (core measures them empty)."""
        overhead = max(self.count_tokens(self._format(t, run.fill(**context))) + pad for t, context, pad in shapes)
        helper = self._prompt_helper
        return context_budget(helper.context_window, helper.num_output, overhead, 0, helper.chunk_size_limit)

    def _pack(self, chunks: Sequence[str], budget: int) -> List[str]:
        return pack_texts(render_chunks(chunks), budget, self._tokenizer)

    def _fit(self, run: RunState, shapes: List[Shape], chunks: Sequence[Any], per_chunk: bool = False) -> List[Any]:
        """Pack ``chunks`` into windows that fit every call shape ``(template, context, padding)``; ``per_chunk``
        only splits chunks that overflow. Text is filled to the token bound (``packing.py``); messages (multimodal)
        are packed by the chat prompt helper (:meth:`_repack`)."""
        if self._multimodal:
            if per_chunk:
                return [m for chunk in chunks for m in self._repack(run, shapes, [chunk])]
            return self._repack(run, shapes, chunks)
        budget = self._budget(run, shapes)
        if per_chunk:
            return [window for chunk in chunks for window in self._pack([chunk], budget)]
        return self._pack(chunks, budget)

    def _repack(self, run: RunState, shapes: List[Shape], chunks: Sequence[Any]) -> List[Any]:
        """Core's packing (``PromptHelper.repack`` / ``ChatPromptHelper.repack``: the helper's splitter, overlap and
        tokenizer) against the biggest template, measured with the query and the extra variables filled."""
        fill = run.fill()
        measured = [_default_of(t).partial_format(**fill) for t, _, _ in shapes]  # what core's pick measures
        padding = max(pad for _, _, pad in shapes)
        helper = self._chat_prompt_helper if self._multimodal else self._prompt_helper
        try:
            if self._multimodal:
                biggest = _template_of(shapes, measured, get_biggest_chat_prompt(measured))
                return helper.repack(self._for_llm(biggest, fill), list(chunks), padding=padding, llm=self._llm)
            biggest = _template_of(shapes, measured, get_biggest_prompt(measured))
            windows = helper.repack(self._for_llm(biggest, fill), chunks, padding=padding, llm=self._llm)
        except ValueError as error:  # core's "Chunk size -232 is not positive." names none of the terms
            raise ConfigurationError(
                f"no room for context: context_window {helper.context_window} - num_output {helper.num_output} - "
                f"padding {padding} - the prompt (template, query, extra variables {sorted(run.extras)}) leaves "
                f"nothing ({error}); shorten the extra variables or use an LLM with a larger context_window"
            ) from error
        return [w for w in windows if w.strip()]  # all-blank chunks: no call (core calls with an empty context)

    def _for_llm(self, template: BasePromptTemplate, fill: Dict[str, Any]) -> BasePromptTemplate:
        """``template`` as the LLM is sent it (a selector's choice for this LLM), filled with ``fill``: only that
        one template is copied (a selector's ``partial_format`` deep-copies every template it holds)."""
        chosen = template.select(llm=self._llm) if isinstance(template, SelectorPromptTemplate) else template
        return chosen.partial_format(**fill)

    def _pick(self, text_template: BasePromptTemplate, content_template: BasePromptTemplate) -> BasePromptTemplate:
        """The template of this medium: text, or message content blocks (multimodal)."""
        return content_template if self._multimodal else text_template

    def _ctx(self, window: Any, name: str = "context_str") -> Dict[str, Any]:
        """The context variable of one call: ``{name: text}``, or ``{"context_messages": [message]}``."""
        return {"context_messages": [window] if window != "" else []} if self._multimodal else {name: window}

    def _as_chunk(self, text: str) -> Any:
        """A text (an intermediate answer) as a chunk of this medium."""
        return ChatMessage(content=text) if self._multimodal else text

    def _prepare_chunks(self, chunks: Sequence[Any]) -> List[Any]:
        return cite.number_chunks(chunks) if self._citations else cite.source_texts(chunks)

    # the mode --------------------------------------------------------------------------------
    def _steps(self, run: RunState, chunks: List[str]) -> Steps:
        """Yield :class:`CallRequest` (or lists of them) and return the answer."""
        raise NotImplementedError

    # calls -----------------------------------------------------------------------------------
    def _record(self, run: RunState, template: BasePromptTemplate, request: CallRequest) -> None:
        tokens = self._prompt_tokens(template, request.kwargs)
        emit(dispatcher, lambda: SynthesisLLMCallEvent(
            mode=self.mode, call_index=run.llm_calls, prompt_tokens=tokens, structured=request.structured))
        run.llm_calls += 1
        run.prompt_tokens += tokens

    def _skip(self, run: RunState, error: str) -> None:
        index = run.llm_calls - 1
        run.skipped_chunks.append({"call_index": index, "error": error})
        emit(dispatcher, lambda: SynthesisChunkSkippedEvent(mode=self.mode, call_index=index, error=error))

    def _program(self, template: BasePromptTemplate) -> Tuple[Any, BasePromptTemplate]:
        if self._program_factory is not None:
            return self._program_factory(template), template
        own = own_copy(template, self._llm)
        return build_program(own, self._llm, verbose=self._verbose), own

    def _call(self, run: RunState, request: CallRequest) -> Any:
        if request.structured:
            program, template = self._program(request.template)
            self._record(run, template, request)
            reply, error = run_program(program, request.kwargs, stream=request.stream)
            if error is not None:
                self._skip(run, error)
            return reply
        self._record(run, request.template, request)
        if request.stream:
            gen = strip_label_stream(self._llm.stream(request.template, **request.kwargs))
            return "".join(gen) if request.consume else gen
        if self._output_cls is not None:
            own = own_copy(request.template, self._llm)  # structured_predict sets an output parser on the prompt it gets
            return self._llm.structured_predict(self._output_cls, own, **request.kwargs).model_dump_json()
        return strip_answer_label(self._llm.predict(request.template, **request.kwargs))

    async def _acall(self, run: RunState, request: CallRequest) -> Any:
        if request.structured:
            program, template = self._program(request.template)
            self._record(run, template, request)
            reply, error = await arun_program(program, request.kwargs, stream=request.stream)
            if error is not None:
                self._skip(run, error)
            return reply
        self._record(run, request.template, request)
        if request.stream:
            agen = astrip_label_stream(await self._llm.astream(request.template, **request.kwargs))
            return "".join([delta async for delta in agen]) if request.consume else agen
        if self._output_cls is not None:
            own = own_copy(request.template, self._llm)
            out = await self._llm.astructured_predict(self._output_cls, own, **request.kwargs)
            return out.model_dump_json()
        return strip_answer_label(await self._llm.apredict(request.template, **request.kwargs))

    def _drive(self, run: RunState, steps: Steps) -> Any:
        try:
            request = next(steps)
            while True:
                if isinstance(request, list):
                    if self._use_async and len(request) > 1:
                        reply: Any = run_async_tasks([self._acall(run, r) for r in request])
                    else:
                        reply = [self._call(run, r) for r in request]
                else:
                    reply = self._call(run, request)
                request = steps.send(reply)
        except StopIteration as stop:
            return stop.value

    async def _adrive(self, run: RunState, steps: Steps) -> Any:
        try:
            request = next(steps)
            while True:
                if isinstance(request, list):
                    reply: Any = list(await asyncio.gather(*(self._acall(run, r) for r in request)))
                else:
                    reply = await self._acall(run, request)
                request = steps.send(reply)
        except StopIteration as stop:
            return stop.value

    # public: get_response --------------------------------------------------------------------
    def _new_run(self, query_str: str, extra_vars: Dict[str, Any]) -> Tuple[RunState, List[str]]:
        active = _ACTIVE_RUN.get()
        if active is not None:
            return active, []  # inside synthesize: its ledger, extras already checked
        options = {k: v for k, v in extra_vars.items() if k in self.response_options}
        extras = {k: v for k, v in extra_vars.items() if k not in self.response_options}
        unused = self.check_variables(extras)
        return RunState(query_str=query_str, extras=extras, options=options), unused

    def _answer(self, query_str: str, chunks: Sequence[Any], extra_vars: Dict[str, Any]) -> Any:
        run, _ = self._new_run(query_str, extra_vars)
        return self._finish(self._drive(run, self._steps(run, self._prepare_chunks(chunks))), is_async=False)

    async def _aanswer(self, query_str: str, chunks: Sequence[Any], extra_vars: Dict[str, Any]) -> Any:
        run, _ = self._new_run(query_str, extra_vars)
        return self._finish(await self._adrive(run, self._steps(run, self._prepare_chunks(chunks))), is_async=True)

    @span_when_observed(dispatcher)
    def get_response(self, query_str: str, text_chunks: Sequence[str], **extra_vars: Any) -> RESPONSE_TEXT_TYPE:
        """The answer over ``text_chunks``; ``extra_vars`` fill extra template variables."""
        return self._answer(query_str, text_chunks, extra_vars)

    @span_when_observed(dispatcher)
    async def aget_response(
        self, query_str: str, text_chunks: Sequence[str], **extra_vars: Any
    ) -> RESPONSE_TEXT_TYPE:
        """Async twin of :meth:`get_response`."""
        return await self._aanswer(query_str, text_chunks, extra_vars)

    def _within(self, query_str: str, extra_vars: Dict[str, Any]) -> ContextManager[RunState]:
        """The ledger to count into (the active synthesize run, or a new one), active while the block runs."""
        return active_run(self._new_run(query_str, extra_vars)[0])

    def _check_messages(self, name: str) -> None:
        if not self._multimodal:
            raise NotImplementedError(
                f"{name} needs a synthesizer built with multimodal=True (and a chat LLM); "
                f"{type(self).__name__} was built with multimodal=False: use get_response for text chunks"
            )

    @span_when_observed(dispatcher)
    def get_response_from_messages(
        self, query_str: str, message_chunks: Sequence[ChatMessage], **extra_vars: Any
    ) -> RESPONSE_TEXT_TYPE:
        """The answer over message chunks (text, image, audio blocks), with ``multimodal=True``."""
        self._check_messages("get_response_from_messages")
        return self._answer(query_str, message_chunks, extra_vars)

    @span_when_observed(dispatcher)
    async def aget_response_from_messages(
        self, query_str: str, message_chunks: Sequence[ChatMessage], **extra_vars: Any
    ) -> RESPONSE_TEXT_TYPE:
        """Async twin of :meth:`get_response_from_messages`."""
        self._check_messages("aget_response_from_messages")
        return await self._aanswer(query_str, message_chunks, extra_vars)

    def _finish(self, result: Any, is_async: bool) -> Any:
        if isinstance(result, str) and self._output_cls is not None:
            try:
                return self._output_cls.model_validate_json(result)
            except (ValidationError, ValueError, TypeError):
                return result
        if isinstance(result, str) and self._streaming and not self._structured:
            # (structured answers were streamed and parsed already: core returns them as a plain Response)
            return agen_of(result) if is_async else gen_of(result)
        return result

    # public: synthesize ----------------------------------------------------------------------
    def _begin(self, query: QueryType, nodes: Sequence[NodeWithScore], extra_vars: Dict[str, Any]) -> Tuple[
        QueryBundle, RunState, List[str], Optional[List[Any]]
    ]:
        """Validate the extras (before any LLM call) and read the chunks; ``None`` chunks: nothing to answer from."""
        bundle = QueryBundle(query_str=query) if isinstance(query, str) else query
        emit(dispatcher, lambda: SynthesizeStartEvent(query=bundle))
        run, unused = self._new_run(bundle.query_str, extra_vars)
        chunks = self._chunks_of(nodes) if len(nodes) > 0 or self.answers_without_nodes else None
        return bundle, run, unused, chunks

    def _respond(self, run: RunState, chunks: Optional[List[Any]], extra_vars: Dict[str, Any]) -> Any:
        """The answer, through ``get_response`` (text) or ``get_response_from_messages`` (message chunks), as core
        routes it (a compact mode packs there), counted in this run's ledger."""
        if chunks is None:
            return self._empty_response
        with active_run(run):
            if self._multimodal:
                return self.get_response_from_messages(query_str=run.query_str, message_chunks=chunks, **extra_vars)
            return self.get_response(query_str=run.query_str, text_chunks=chunks, **extra_vars)

    async def _arespond(self, run: RunState, chunks: Optional[List[Any]], extra_vars: Dict[str, Any]) -> Any:
        """Async twin of :meth:`_respond`."""
        if chunks is None:
            return self._empty_response
        with active_run(run):
            if self._multimodal:
                return await self.aget_response_from_messages(
                    query_str=run.query_str, message_chunks=chunks, **extra_vars
                )
            return await self.aget_response(query_str=run.query_str, text_chunks=chunks, **extra_vars)

    def _chunks_of(self, nodes: Sequence[NodeWithScore]) -> List[Any]:
        if self._multimodal:
            return [ChatMessage(blocks=n.node.get_content_blocks(metadata_mode=self.metadata_mode)) for n in nodes]
        return [n.node.get_content(metadata_mode=self.metadata_mode) for n in nodes]

    def _cb_event(self, bundle: QueryBundle) -> Any:
        return self._callback_manager.event(CBEventType.SYNTHESIZE, payload={EventPayload.QUERY_STR: bundle.query_str})

    def _end(self, event: Any, bundle: QueryBundle, response: RESPONSE_TYPE) -> RESPONSE_TYPE:
        event.on_end(payload={EventPayload.RESPONSE: response})
        emit(dispatcher, lambda: SynthesizeEndEvent(query=bundle, response=response))
        return response

    @span_when_observed(dispatcher)
    def synthesize(
        self,
        query: QueryType,
        nodes: List[NodeWithScore],
        additional_source_nodes: Optional[Sequence[NodeWithScore]] = None,
        **extra_vars: Any,
    ) -> RESPONSE_TYPE:
        """Answer ``query`` from ``nodes``; ``extra_vars`` fill extra template variables (checked first)."""
        bundle, run, unused, chunks = self._begin(query, nodes, extra_vars)
        with self._cb_event(bundle) as event:
            result = self._finish(self._respond(run, chunks, extra_vars), is_async=False)
            response = self._build_response(result, run, bundle.query_str, nodes, additional_source_nodes, unused)
            return self._end(event, bundle, response)

    @span_when_observed(dispatcher)
    async def asynthesize(
        self,
        query: QueryType,
        nodes: List[NodeWithScore],
        additional_source_nodes: Optional[Sequence[NodeWithScore]] = None,
        **extra_vars: Any,
    ) -> RESPONSE_TYPE:
        """Async twin of :meth:`synthesize`."""
        bundle, run, unused, chunks = self._begin(query, nodes, extra_vars)
        with self._cb_event(bundle) as event:
            result = self._finish(await self._arespond(run, chunks, extra_vars), is_async=True)
            response = self._build_response(result, run, bundle.query_str, nodes, additional_source_nodes, unused)
            return self._end(event, bundle, response)

    def _metadata(self, run: RunState, sources: List[NodeWithScore], unused: List[str]) -> Dict[str, Any]:
        metadata: Dict[str, Any] = {n.node.node_id: n.node.metadata for n in sources}
        metadata.update(
            {
                "llm_calls": run.llm_calls,
                "prompt_tokens": run.prompt_tokens,
                "llm_calls_saved": run.llm_calls_saved,
                "skipped_chunks": run.skipped_chunks,
                "unused_variables": unused,
            }
        )
        return metadata

    def _build_response(
        self,
        result: Any,
        run: RunState,
        question: str,
        nodes: Sequence[NodeWithScore],
        additional: Optional[Sequence[NodeWithScore]],
        unused: List[str],
    ) -> RESPONSE_TYPE:
        sources = list(nodes) + list(additional if additional is not None else [])
        metadata = self._metadata(run, sources, unused)
        numbered = list(nodes)
        citing = self._citations or self._aligned
        passages = [n.node.get_content() for n in numbered] if self._aligned else []
        if citing:
            metadata.update(cite.citation_metadata("", numbered), citation_mode=self.citation_mode)
        # aligned: a short answer is shown as its passage writes it (synthesizers/completion.py), then cited, each
        # sentence judged once (its grounding goes to the metadata); a stream does the same through one StreamHold
        if isinstance(result, str):
            if self._aligned:
                result, done = complete_answer(result, passages, question)
                if done is not None:
                    metadata[COMPLETION_KEY] = done.to_dict()
                result, judged, _ = cite_judged(result, passages, passage_terms_of(passages),
                                                scorer=self._support_scorer)
                metadata[GROUNDING_KEY] = grounding_of(judged, scorer=self._support_scorer)
            if citing:
                metadata.update(cite.citation_metadata(result, numbered))
            return Response(result, source_nodes=sources, metadata=metadata)
        if isinstance(result, (Generator, AsyncGenerator)):
            hold = StreamHold(passages, question if self._aligned else None, align=self._aligned,
                              nodes=numbered if citing else None, metadata=metadata, scorer=self._support_scorer)
            return held_response(result, hold, sources)
        if self._output_cls is not None and isinstance(result, self._output_cls):
            return PydanticResponse(result, source_nodes=sources, metadata=metadata)
        raise ConfigurationError(f"a synthesizer must produce a str, a stream or output_cls, got {type(result).__name__}")
