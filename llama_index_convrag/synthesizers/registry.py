"""The registry behind :func:`get_response_synthesizer`: mode name -> synthesizer class."""

from __future__ import annotations

from typing import Dict, List, Type, Union

from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError
from llama_index_convrag.synthesizers.base import BaseSynthesizer
from llama_index_convrag.synthesizers.types import ResponseMode

_REGISTRY: Dict[str, "Type[BaseSynthesizer]"] = {}


def _key(mode: Union[str, ResponseMode]) -> str:
    return mode.value if isinstance(mode, ResponseMode) else str(mode)


def register_mode(mode: Union[str, ResponseMode], cls: "Type[BaseSynthesizer]", *, replace: bool = False) -> None:
    """Make ``cls`` reachable as ``get_response_synthesizer(response_mode=mode)``.

    ``cls`` must subclass our :class:`~llama_index_convrag.synthesizers.base.BaseSynthesizer` (its
    ``from_config`` builds it from the factory's arguments). Re-registering a name needs ``replace=True``.
    """
    if not (isinstance(cls, type) and issubclass(cls, BaseSynthesizer)):
        raise ArgumentTypeError(f"cls must subclass llama_index_convrag.synthesizers.BaseSynthesizer, got {cls!r}")
    key = _key(mode)
    if key in _REGISTRY and _REGISTRY[key] is not cls and not replace:
        raise ConfigurationError(f"mode {key!r} is already registered to {_REGISTRY[key].__name__}; pass replace=True")
    _REGISTRY[key] = cls


def unregister_mode(mode: Union[str, ResponseMode]) -> None:
    """Remove a registered mode (built-in modes included)."""
    _REGISTRY.pop(_key(mode), None)


def registered_modes() -> List[str]:
    """Registered mode names, sorted."""
    return sorted(_REGISTRY)


def lookup_mode(mode: Union[str, ResponseMode]) -> "Type[BaseSynthesizer]":
    """The class for ``mode``; raises listing the registered modes."""
    key = _key(mode)
    if key not in _REGISTRY:
        raise ConfigurationError(f"response_mode must be one of {registered_modes()}, got {key!r}")
    return _REGISTRY[key]
