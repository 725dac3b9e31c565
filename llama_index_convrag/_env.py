"""Pure helper shared by the resolvers: an explicit argument wins, then a non-empty environment variable."""

from __future__ import annotations

from typing import Mapping, Optional


def pick(arg: Optional[str], env: Mapping[str, str], name: str) -> Optional[str]:
    """``arg`` if given, else ``env[name]`` when set and non-empty, else ``None``."""
    if arg is not None:
        return arg
    value = env.get(name)
    return value if value else None
