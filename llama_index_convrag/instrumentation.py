"""Instrumentation that costs nothing when nobody listens.

LlamaIndex's ``@dispatcher.span`` binds ``inspect.signature`` and makes a uuid on every call, and
every ``dispatcher.event`` builds a pydantic event with its own uuid, even when the only handlers on the dispatcher
chain are the null ones LlamaIndex installs by default. :func:`observed` tells whether anything real listens;
:func:`span_when_observed` opens the span only then and :func:`emit` builds an event only then. With a handler
attached, spans and events are exactly LlamaIndex's.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Optional, TypeVar

from llama_index.core.callbacks import CallbackManager
from llama_index_instrumentation import get_dispatcher
from llama_index_instrumentation.dispatcher import DISPATCHER_SPAN_DECORATED_ATTR, Dispatcher
from llama_index_instrumentation.event_handlers import NullEventHandler
from llama_index_instrumentation.span_handlers import NullSpanHandler

F = TypeVar("F", bound=Callable[..., Any])


def observed(dispatcher: Dispatcher, callback_manager: Optional[CallbackManager] = None) -> bool:
    """Whether anything listens: a callback handler, or a non-null span or event handler on ``dispatcher``'s chain
    (the dispatchers its events propagate to)."""
    if callback_manager is not None and callback_manager.handlers:
        return True
    d: Any = dispatcher
    while d is not None:
        if any(not isinstance(h, NullEventHandler) for h in d.event_handlers) or \
                any(not isinstance(h, NullSpanHandler) for h in d.span_handlers):
            return True
        if not d.propagate or d.manager is None or d.parent_name not in d.manager.dispatchers:
            break
        d = d.parent
    return False


def unspanned(method: F) -> F:
    """Keep LlamaIndex's ``DispatcherSpanMixin`` from wrapping ``method`` in a span (it skips methods marked as
    already decorated); the method's owner opens the span itself when :func:`observed`."""
    setattr(method, DISPATCHER_SPAN_DECORATED_ATTR, True)
    return method


def span_when_observed(dispatcher: Dispatcher) -> Callable[[F], F]:
    """Method decorator: the call runs in ``dispatcher.span`` (bound to the instance, exactly as ``@dispatcher.span``
    would) when :func:`observed`, else the method runs alone. Sync and async methods."""

    def decorate(method: F) -> F:
        spanned = dispatcher.span(method)  # marks ``method`` as decorated; ``wraps`` copies the mark

        def pick(self: Any) -> Callable[..., Any]:
            return spanned.__get__(self, type(self)) if observed(dispatcher) else method.__get__(self, type(self))

        if inspect.iscoroutinefunction(method):
            @functools.wraps(method)
            async def async_wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
                return await pick(self)(*args, **kwargs)

            return unspanned(async_wrapper)  # type: ignore[return-value]

        @functools.wraps(method)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            return pick(self)(*args, **kwargs)

        return unspanned(wrapper)  # type: ignore[return-value]

    return decorate


def quiet_spans(cls: type) -> None:
    """For a ``DispatcherSpanMixin`` subclass's ``__init_subclass__``, before ``super().__init_subclass__()``: the
    methods the mixin would wrap in ``dispatcher.span`` (implementations of abstract methods, overrides of spanned
    ones) get :func:`span_when_observed` instead, with the same dispatcher (the class's module); the mixin then
    skips them. Only plain functions; anything else is left to the mixin."""
    names = set()
    for base in inspect.getmro(cls)[1:]:
        for attr, method in base.__dict__.items():
            if callable(method) and (getattr(method, "__isabstractmethod__", False)
                                     or hasattr(method, DISPATCHER_SPAN_DECORATED_ATTR)):
                names.add(attr)
    dispatcher = get_dispatcher(cls.__module__)
    for attr, method in list(cls.__dict__.items()):
        if attr in names and inspect.isfunction(method) and not getattr(method, "__isabstractmethod__", False) \
                and not hasattr(method, DISPATCHER_SPAN_DECORATED_ATTR):
            setattr(cls, attr, span_when_observed(dispatcher)(method))


def emit(dispatcher: Dispatcher, make_event: Callable[[], Any]) -> None:
    """``dispatcher.event(make_event())`` when :func:`observed`; the event is not even built otherwise."""
    if observed(dispatcher):
        dispatcher.event(make_event())


__all__ = ["emit", "observed", "quiet_spans", "span_when_observed", "unspanned"]
