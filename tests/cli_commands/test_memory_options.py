"""``convrag serve --memory ...`` onto ``MemoryOptions`` (pure: no file, no connection)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from llama_index_convrag.cli import build_parser, main
from llama_index_convrag.cli_commands.common import CLIError
from llama_index_convrag.cli_commands.memory_options import memory_options, memory_parts
from llama_index_convrag.memory import MemoryOptions


def serve_args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["serve", *argv])


def test_off_by_default_and_alone_the_library_defaults() -> None:
    assert memory_options(serve_args(), has_llm=True) is None
    assert memory_options(serve_args("--memory", "off"), has_llm=True) is None
    alone = memory_options(serve_args("--memory"), has_llm=False)
    assert alone == MemoryOptions()  # recall and the summary on, facts off
    assert (alone.episodic.enabled, alone.summary.enabled, alone.facts.enabled) == (True, True, False)


def test_each_part_and_its_limits_map_onto_the_options() -> None:
    o = memory_options(serve_args("--memory", "facts,summary", "--memory-window", "4", "--recall-k", "3",
                                  "--summary-max-tokens", "120", "--summary-no-llm", "salient",
                                  "--memory-writers", "2"), has_llm=True)
    assert (o.episodic.enabled, o.summary.enabled, o.facts.enabled) == (False, True, True)
    assert (o.episodic.window, o.summary.window, o.episodic.k) == (4, 4, 3)
    assert (o.summary.max_tokens, o.summary.no_llm, o.writers) == (120, "salient", 2)
    assert memory_parts("recall, recall ,summary") == ["recall", "summary"]


@pytest.mark.parametrize("text", ["episodic", "recall,vector", ",", ""])
def test_an_unknown_part_is_a_usage_error_naming_the_accepted(text: str) -> None:
    with pytest.raises(CLIError) as e:
        memory_parts(text)
    assert e.value.code == 2 and "['recall', 'summary', 'facts']" in str(e.value) and repr(text) in str(e.value)


def test_a_shared_milvus_server_turns_the_row_cache_off() -> None:
    alone = memory_options(serve_args("--memory", "recall"), has_llm=False)
    shared = memory_options(serve_args("--memory", "recall"), has_llm=False, shared_milvus=True)
    assert (alone.episodic.cached_rows, shared.episodic.cached_rows) == (50_000, 0)
    assert shared.episodic.enabled and shared.summary == alone.summary


def test_facts_without_an_llm_is_refused() -> None:
    with pytest.raises(CLIError) as e:
        memory_options(serve_args("--memory", "recall,facts"), has_llm=False)
    assert e.value.code == 2 and "--memory facts needs an LLM" in str(e.value)


def test_serve_checks_memory_before_opening_anything(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["serve", "--memory", "everything", "--store", str(tmp_path / "c.db"),
                 "--uri", str(tmp_path / "m.db")]) == 2
    assert "--memory 'everything'" in capsys.readouterr().err
    assert not (tmp_path / "c.db").exists() and not (tmp_path / "m.db").exists()
