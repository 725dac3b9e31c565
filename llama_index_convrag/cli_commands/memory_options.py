"""``convrag serve``'s memory options turned into the library's
:class:`~llama_index_convrag.memory.options.MemoryOptions`:

* ``--memory PARTS`` -> which parts are on: a comma list of :data:`MEMORY_PARTS` (``recall``:
  ``EpisodicOptions``, ``summary``: ``SummaryOptions``, ``facts``: ``FactsOptions``), ``off`` (the default: the
  engine's own default, ``memory=None``), ``--memory`` alone: ``MemoryOptions()``'s parts (recall and the summary;
  facts stay opt-in);
* ``--memory-window N`` -> ``EpisodicOptions.window`` and ``SummaryOptions.window`` (recent messages every prompt
  holds); ``--recall-k N`` -> ``EpisodicOptions.k``; ``--summary-max-tokens N`` -> ``SummaryOptions.max_tokens``;
  ``--summary-no-llm`` -> ``SummaryOptions.no_llm`` (what the summary is without an LLM); ``--memory-writers N`` ->
  ``MemoryOptions.writers`` (the threads that run the writes after the turns).

Pure: checked before any file or connection is opened (exit 2 naming the bad value and the accepted ones).
"""

from __future__ import annotations

from typing import Any, List, Optional

from llama_index_convrag.cli_commands.common import EXIT_USAGE, CLIError

MEMORY_PARTS = ("recall", "summary", "facts")
#: ``--memory`` given without a value: ``MemoryOptions()``'s parts
DEFAULT_PARTS = "recall,summary"
OFF = "off"


def memory_parts(text: Optional[str]) -> List[str]:
    """The parts ``--memory`` names (``[]``: off); exit 2 for an unknown one."""
    if text is None or text.strip() == OFF:
        return []
    parts = [p.strip() for p in text.split(",") if p.strip()]
    bad = [p for p in parts if p not in MEMORY_PARTS]
    if bad or not parts:
        raise CLIError(EXIT_USAGE, f"--memory {text!r}: expected a comma list of {list(MEMORY_PARTS)} or {OFF!r}"
                                   f"{f', not {bad}' if bad else ''}")
    return list(dict.fromkeys(parts))


def memory_options(args: Any, has_llm: bool, shared_milvus: bool = False) -> Any:
    """``MemoryOptions`` for ``args`` (None: memory off); exit 2 when facts are asked for without an LLM.

    ``shared_milvus``: the recall's collection lives on a Milvus server that other processes write (``--workers``,
    the CLI beside a server): a message's row rewritten there (a regenerated answer) would stay cached here, so the
    recall reads the fields at every recall (``EpisodicOptions.cached_rows=0``)."""
    from llama_index_convrag.errors import ConfigurationError
    from llama_index_convrag.memory import EpisodicOptions, FactsOptions, MemoryOptions, SummaryOptions

    parts = memory_parts(getattr(args, "memory", None))
    if not parts:
        return None
    if "facts" in parts and not has_llm:
        raise CLIError(EXIT_USAGE, "--memory facts needs an LLM to extract them (set OPENAI_API_KEY or --base-url, "
                                   "or --gguf); recall and summary work without one")
    window = getattr(args, "memory_window", None)
    episodic = {"enabled": "recall" in parts, **({"window": window} if window is not None else {})}
    if shared_milvus:
        episodic["cached_rows"] = 0
    if getattr(args, "recall_k", None) is not None:
        episodic["k"] = args.recall_k
    summary = {"enabled": "summary" in parts, **({"window": window} if window is not None else {})}
    if getattr(args, "summary_max_tokens", None) is not None:
        summary["max_tokens"] = args.summary_max_tokens
    if getattr(args, "summary_no_llm", None) is not None:
        summary["no_llm"] = args.summary_no_llm
    try:
        writers = getattr(args, "memory_writers", None)
        return MemoryOptions(episodic=EpisodicOptions(**episodic), summary=SummaryOptions(**summary),
                             facts=FactsOptions(enabled="facts" in parts),
                             **({"writers": writers} if writers is not None else {}))
    except ConfigurationError as e:
        raise CLIError(EXIT_USAGE, str(e)) from e
