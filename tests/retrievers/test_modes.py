"""The retriever's choice lists are one source: the parameter validation and the CLI read the same tuples."""

import argparse

from llama_index_convrag.cli import build_parser
from llama_index_convrag.retrievers import modes, params


def _choices(parser: argparse.ArgumentParser, command: str, option: str) -> tuple:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return next(a.choices for a in sub._actions if option in a.option_strings)


def test_lists():
    assert modes.SEARCH_TYPES == ("dense", "sparse", "hybrid")
    assert modes.FUSION_TYPES == modes.PRE_RANKER_TYPES == ("rrf", "weighted")
    assert modes.RANKER_TYPES == ("rrf", "weighted", "model")


def test_params_and_cli_use_the_same_lists():
    assert params.SEARCH_TYPES is modes.SEARCH_TYPES and params.RANKER_TYPES is modes.RANKER_TYPES
    parser = build_parser()
    for command in ("ask", "chat"):
        assert _choices(parser, command, "--search-type") is modes.SEARCH_TYPES
        assert _choices(parser, command, "--ranker") is modes.FUSION_TYPES
