"""LlamaIndex ``MetadataFilters`` -> Milvus boolean expression, with ONE escaping function for every string.

Milvus string literals are double-quoted; its lexer un-escapes ``\\\\`` and ``\\"`` and treats a backslash before a
raw line break as that line break (a bare newline inside a literal is a syntax error, and ``\\n`` is NOT a newline).
A carriage return cannot be written in a Milvus literal at all (raw or escaped), so such values are refused.
:func:`quote_string` applies exactly those rules, so a value never changes the expression's structure.
"""

from __future__ import annotations

import math
from typing import Any, Callable, List, Optional, Union

from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)
from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError

SUPPORTED_OPERATORS = (
    FilterOperator.EQ, FilterOperator.NE, FilterOperator.GT, FilterOperator.GTE, FilterOperator.LT,
    FilterOperator.LTE, FilterOperator.IN, FilterOperator.NIN, FilterOperator.CONTAINS,
    FilterOperator.TEXT_MATCH, FilterOperator.IS_EMPTY,
)
_COMPARE = {
    FilterOperator.EQ: "==", FilterOperator.NE: "!=", FilterOperator.GT: ">", FilterOperator.GTE: ">=",
    FilterOperator.LT: "<", FilterOperator.LTE: "<=",
}


def quote_string(value: str) -> str:
    """A Milvus string literal that matches ``value`` exactly (the one escaping function)."""
    if not isinstance(value, str):
        raise ArgumentTypeError(f"quote_string expects str, got {type(value).__name__}")
    if "\r" in value:
        raise ConfigurationError(f"Milvus string literals cannot contain a carriage return: {value!r}")
    body = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\\n")
    return f'"{body}"'


def _like_pattern(value: str) -> str:
    """A LIKE pattern for 'contains ``value``' (``%``/``_``/``\\`` made literal), then quoted."""
    body = value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return quote_string(f"%{body}%")


def literal(value: Any) -> str:
    """A Milvus literal for a scalar value: str, bool, int or finite float."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigurationError(f"filter value must be finite, got {value!r}")
        return repr(value)
    if isinstance(value, str):
        return quote_string(value)
    raise ConfigurationError(f"filter value must be str, int, float or bool, got {type(value).__name__}: {value!r}")


def _list(value: Any) -> str:
    if not isinstance(value, (list, tuple)):
        raise ConfigurationError(f"IN/NIN filter value must be a list, got {value!r}")
    return "[" + ", ".join(literal(v) for v in value) + "]"


def _one(f: MetadataFilter, ref: Callable[[str], str]) -> str:
    op = f.operator
    if op not in SUPPORTED_OPERATORS:
        raise ConfigurationError(f"filter operator must be one of {[o.value for o in SUPPORTED_OPERATORS]}, got {op.value!r}")
    field = ref(f.key)
    if op in _COMPARE:
        return f"{field} {_COMPARE[op]} {literal(f.value)}"
    if op == FilterOperator.IN:
        return f"{field} in {_list(f.value)}"
    if op == FilterOperator.NIN:
        return f"{field} not in {_list(f.value)}"
    if op == FilterOperator.CONTAINS:  # the metadata value is a list that contains f.value
        return f"json_contains({field}, {literal(f.value)})"
    if op == FilterOperator.TEXT_MATCH:  # substring match on a string value
        if not isinstance(f.value, str):
            raise ConfigurationError(f"TEXT_MATCH needs a string value, got {f.value!r}")
        return f"{field} like {_like_pattern(f.value)}"
    return f"{field} is null"  # IS_EMPTY


def filters_to_expr(filters: Optional[Union[MetadataFilters, MetadataFilter]], ref: Callable[[str], str]) -> str:
    """The Milvus expression for ``filters`` (``""`` for none); ``ref(key)`` addresses a metadata key."""
    if filters is None:
        return ""
    if isinstance(filters, MetadataFilter):
        return _one(filters, ref)
    parts: List[str] = []
    for f in filters.filters:
        expr = filters_to_expr(f, ref)
        if expr:
            parts.append(f"({expr})")
    if not parts:
        return ""
    cond = filters.condition if filters.condition is not None else FilterCondition.AND
    if cond == FilterCondition.NOT:
        return "not (" + " and ".join(parts) + ")"
    if cond not in (FilterCondition.AND, FilterCondition.OR):
        raise ConfigurationError(f"filter condition must be one of ['and', 'or', 'not'], got {cond!r}")
    return f" {cond.value} ".join(parts)


def combine(*exprs: str) -> str:
    """AND of the non-empty expressions, each parenthesised."""
    parts = [f"({e})" for e in exprs if e]
    return " and ".join(parts)
