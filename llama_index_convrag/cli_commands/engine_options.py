"""The chat-engine options of ``convrag ask`` / ``convrag chat`` turned into ``as_chat_engine`` keyword arguments.

Each CLI option maps onto the engine's own surface, the same names and option objects a library user passes, with
the library's own choice lists (``cli.py`` repeats them so that ``--help`` stays light; ``tests/test_cli.py`` checks
they agree):

* ``--response-mode`` -> ``AnswerOptions(response_mode=...)`` (``get_response_synthesizer``'s modes);
* ``--rewrite-strategy`` -> ``RewriteOptions(strategy=...)`` (``chat.defaults.REWRITE_STRATEGIES``);
* ``--chat-mode`` -> ``chat_mode`` and ``--system-prompt`` -> ``system_prompt`` (context modes only);
* ``--top-k``, ``--search-type``, ``--ranker``, ``--no-feedback`` -> ``retriever_kwargs`` (``as_retriever``'s);
* ``--top-k N --widen C`` -> ``AnswerOptions(widen=WidenRules(before=C, after=C, passages=N))`` and
  ``similarity_top_k`` ``N x`` :data:`HITS_PER_PASSAGE`: N passages read, each hit with C chunks on each side, from
  twice as many hits (a hit merged into a better one's passage leaves its place to the next), as the library's
  defaults read 5 passages of the top 10; ``--widen 0`` / ``--no-widen`` -> ``widen=None`` and the top N hits read
  as they are;
* ``--rerank`` -> ``retriever_kwargs`` ``ranker_type="model"`` with a :class:`ModelRerank` over the fused candidates;
* ``--filter KEY OP VALUE`` (repeatable, all must hold) -> ``retriever_kwargs`` ``filters`` (``MetadataFilters``);
* ``--conversation ID`` -> ``conversation_id`` (resume a stored conversation);
* ``--no-citations`` -> ``AnswerOptions(citations=False)`` (answers without ``[n]`` markers);
* ``--citation-mode`` -> ``AnswerOptions(citation_mode=...)`` (``inline``: the LLM writes the markers; ``aligned``:
  they are matched to the passages after it answered without them);
* ``--context-window``, ``--max-tokens``, ``--llm-timeout`` -> the LLM's limits (:func:`limit_kwargs`; explicit,
  then ``CONVRAG_LLM_CONTEXT_WINDOW`` / ``CONVRAG_LLM_MAX_TOKENS`` / ``CONVRAG_LLM_TIMEOUT``, then what the server
  reports, then the defaults: ``config.model_limits``).

Combinations the library would refuse later (an LLM-only option without an LLM, a system prompt in the
condense-question mode) are refused here, before any file or connection is opened: exit 2 with the reason.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from llama_index_convrag.cli_commands.common import EXIT_USAGE, CLIError

#: ``--filter`` operators -> LlamaIndex ``FilterOperator`` values (``=`` is ``==``); longest first for parsing.
FILTER_OPERATORS: Dict[str, str] = {"==": "==", "!=": "!=", ">=": ">=", "<=": "<=", "=": "==", ">": ">", "<": "<"}
_FILTER = re.compile(r"^\s*([^=!<>\s][^=!<>]*?)\s*(==|!=|>=|<=|=|>|<)\s*(.*?)\s*$", re.DOTALL)
FILTER_FORMS = "KEY=VALUE or KEY OP VALUE with OP one of ==, !=, >, >=, <, <= (e.g. file_name=notes.md, chunk>=2)"

#: Response modes that need no LLM (``requires_llm = False`` on their synthesizer classes).
NO_LLM_RESPONSE_MODES = ("context_only", "extractive", "no_text")
#: Rewrite strategies that need no LLM (``auto`` is ``contextual`` without one).
NO_LLM_REWRITE_STRATEGIES = ("auto", "concat", "contextual", "none")
#: ``--rerank`` scorers: ``embedding`` re-scores passage windows with the embedding model (offline), ``llm`` asks
#: the LLM to rank the candidates (listwise).
RERANKERS = ("embedding", "llm")
#: Fused candidates handed to the reranker: the retriever's ``pre_topk`` default, or the hits (:func:`hits`) when more.
RERANK_MIN_CANDIDATES = 10


#: Hits retrieved per passage read while widening is on (the library's defaults: 10 hits, ``WidenRules.passages``
#: 5). Measured: ``bench/answer_containment.py --passages`` (RGB English, answer inside a passage read: 1.000 with 5
#: passages of the top 10 against 0.775 with the top 5 hits widened; CAsT 2021 0.925 against 0.900).
HITS_PER_PASSAGE = 2


def hits(args: Any) -> int:
    """Hits to retrieve for ``--top-k`` passages: :data:`HITS_PER_PASSAGE` each while widening, else one each."""
    return args.top_k * HITS_PER_PASSAGE if getattr(args, "widen", 1) else args.top_k


#: The limit options: CLI destination -> ``resolve_llm`` keyword.
LIMIT_OPTIONS = {"context_window": "context_window", "max_tokens": "max_tokens", "llm_timeout": "timeout"}


def limit_kwargs(args: Any) -> Dict[str, Any]:
    """``context_window`` / ``max_tokens`` / ``timeout`` for ``resolve_llm``: only those given on the command line."""
    given = {kw: getattr(args, dest, None) for dest, kw in LIMIT_OPTIONS.items()}
    return {k: v for k, v in given.items() if v is not None}


def filter_value(text: str) -> Any:
    """A JSON number, boolean or quoted string as that type (``2`` -> 2, ``"2"`` -> ``'2'``); anything else as
    the text itself (``notes.md``)."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, (int, float, str, bool)) else text


def parse_filter(text: str) -> Tuple[str, str, Any]:
    """``(key, operator, value)`` of one ``--filter``; exit 2 naming the accepted forms. No I/O."""
    match = _FILTER.match(text)
    if match is None or not match.group(3):
        raise CLIError(EXIT_USAGE, f"--filter {text!r} is not a condition; use {FILTER_FORMS}")
    key, op, raw = match.group(1), FILTER_OPERATORS[match.group(2)], match.group(3)
    value = filter_value(raw)
    if op in (">", ">=", "<", "<=") and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise CLIError(EXIT_USAGE, f"--filter {text!r} compares with {op} but {raw!r} is not a number")
    return key, op, value


def build_filters(texts: Optional[Sequence[str]]) -> Any:
    """LlamaIndex ``MetadataFilters`` (AND of every ``--filter``), or None."""
    if not texts:
        return None
    from llama_index.core.vector_stores.types import FilterCondition, MetadataFilter, MetadataFilters

    conditions = [parse_filter(t) for t in texts]
    return MetadataFilters(filters=[MetadataFilter(key=k, operator=op, value=v) for k, op, v in conditions],
                           condition=FilterCondition.AND)


def check_static(args: Any) -> None:
    """Exit 2 for a malformed ``--filter`` or a combination no chat mode accepts; pure, run before any I/O."""
    for text in args.filter or ():
        parse_filter(text)
    if args.system_prompt is not None and args.chat_mode in (None, "condense_question"):
        raise CLIError(EXIT_USAGE, "--system-prompt shapes the answers of --chat-mode condense_plus_context or "
                                   "context; the default condense_question answers with the synthesizer's template")
    if args.chat_mode == "context" and args.rewrite_strategy not in (None, "auto", "none"):
        raise CLIError(EXIT_USAGE, f"--chat-mode context retrieves with the question as written (no rewrite); "
                                   f"drop --rewrite-strategy {args.rewrite_strategy}")


def check_llm_needs(args: Any, has_llm: bool) -> None:
    """Exit 2 when an option that needs an LLM is given without one; run once the LLM is resolved, before
    Milvus is opened."""
    needs_llm: List[str] = []
    if args.response_mode is not None and args.response_mode not in NO_LLM_RESPONSE_MODES:
        needs_llm.append(f"--response-mode {args.response_mode}")
    if args.rewrite_strategy is not None and args.rewrite_strategy not in NO_LLM_REWRITE_STRATEGIES:
        needs_llm.append(f"--rewrite-strategy {args.rewrite_strategy}")
    if args.rerank == "llm":
        needs_llm.append("--rerank llm")
    if args.system_prompt is not None:
        needs_llm.append("--system-prompt")
    if needs_llm and not has_llm:
        raise CLIError(EXIT_USAGE, f"{', '.join(needs_llm)} need(s) an LLM (set OPENAI_API_KEY or --base-url, or "
                                   f"--gguf); without one: --response-mode {'/'.join(NO_LLM_RESPONSE_MODES)}, "
                                   f"--rewrite-strategy {'/'.join(NO_LLM_REWRITE_STRATEGIES)}, --rerank embedding")


def reranker(name: str, llm: Any, embed_model: Any) -> Any:
    """A :class:`ModelRerank` with the ``name`` scorer (:data:`RERANKERS`)."""
    from llama_index_convrag.postprocessors.model_rerank import ModelRerank
    from llama_index_convrag.postprocessors.scorers import EmbeddingScorer, LLMScorer

    scorer = EmbeddingScorer(embed_model) if name == "embedding" else LLMScorer(llm)
    return ModelRerank(scorer)


def retriever_kwargs(args: Any, llm: Any, embed_model: Any) -> Dict[str, Any]:
    """``similarity_top_k`` (:func:`hits`), ``search_type``, ``ranker_type`` / ``ranker_params``, ``feedback`` and
    ``filters`` for the engine."""
    kw: Dict[str, Any] = {"similarity_top_k": hits(args), "search_type": args.search_type}
    if args.rerank is not None:
        params: Dict[str, Any] = {"model": reranker(args.rerank, llm, embed_model),
                                  "pre_topk": max(RERANK_MIN_CANDIDATES, hits(args))}
        if args.search_type == "hybrid":
            params["pre_ranker_type"] = args.ranker
        kw.update(ranker_type="model", ranker_params=params)
    elif args.search_type == "hybrid":
        kw["ranker_type"] = args.ranker
    if not args.feedback:
        kw["feedback"] = False
    filters = build_filters(args.filter)
    if filters is not None:
        kw["filters"] = filters
    return kw


def widen_option(args: Any) -> Optional[Any]:
    """``AnswerOptions.widen`` of ``--widen`` (chunks on each side; 0: None, the matched chunks alone) and ``--top-k``
    (the passages read at most: as many as the hits retrieved)."""
    from llama_index_convrag.postprocessors.widen import DEFAULT_WIDEN, WidenRules

    chunks = getattr(args, "widen", DEFAULT_WIDEN.before)
    if chunks == 0:
        return None
    return WidenRules(before=chunks, after=chunks, passages=args.top_k)


def engine_kwargs(args: Any, llm: Any) -> Dict[str, Any]:
    """``llm`` (None: retrieval-only, extractive answers), ``chat_mode``, ``system_prompt``, ``conversation_id``,
    ``rewrite`` and ``answer``: only what was given, so the engine's defaults apply otherwise."""
    from llama_index_convrag.chat.defaults import NO_LLM_RESPONSE_MODE
    from llama_index_convrag.chat.options import AnswerOptions, RewriteOptions
    from llama_index_convrag.postprocessors.widen import DEFAULT_WIDEN

    kw: Dict[str, Any] = {"llm": llm}
    given = {"chat_mode": args.chat_mode, "system_prompt": args.system_prompt, "conversation_id": args.conversation}
    kw.update({k: v for k, v in given.items() if v is not None})
    if args.rewrite_strategy is not None:
        kw["rewrite"] = RewriteOptions(strategy=args.rewrite_strategy)
    answer: Dict[str, Any] = {}
    response_mode = args.response_mode if args.response_mode is not None else (
        NO_LLM_RESPONSE_MODE if llm is None else None)
    if response_mode is not None:
        answer["response_mode"] = response_mode
    if getattr(args, "citations", True) is False:
        answer["citations"] = False
    if getattr(args, "citation_mode", None) is not None:
        answer["citation_mode"] = args.citation_mode
    widen = widen_option(args)
    if widen != DEFAULT_WIDEN:
        answer["widen"] = widen
    if answer:
        kw["answer"] = AnswerOptions(**answer)
    return kw
