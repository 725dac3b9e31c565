"""``auth``: the key of an ``Authorization`` header and loopback hosts, on hand-built values."""

from __future__ import annotations

from typing import Optional

import pytest

from llama_index_convrag.serve.auth import bearer_key, is_loopback


@pytest.mark.parametrize("header, key", [
    (None, None), ("", None), ("Bearer", None), ("Bearer ", None), ("Basic abc", None), ("Token abc", None),
    ("Bearer abc", "abc"), ("bearer abc", "abc"), ("BEARER  abc ", "abc"), ("Bearer a b", "a b"),
])
def test_bearer_key_reads_only_a_bearer_scheme_with_a_key(header: Optional[str], key: Optional[str]) -> None:
    assert bearer_key(header) == key


@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.8.9.1", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("10.0.0.1", False), ("example.org", False), (None, False), ("", False),
])
def test_is_loopback(host: Optional[str], loopback: bool) -> None:
    assert is_loopback(host) is loopback
