"""One scope for a context variable: ``bound(var, value)`` sets it for a ``with`` block and restores it after."""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator, TypeVar

T = TypeVar("T")


@contextmanager
def bound(var: "ContextVar[T]", value: T) -> Iterator[T]:
    """``var`` holds ``value`` while the block runs (threads and tasks started inside see it too); yields ``value``."""
    token = var.set(value)
    try:
        yield value
    finally:
        var.reset(token)


__all__ = ["bound"]
