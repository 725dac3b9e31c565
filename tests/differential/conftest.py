"""The ``divergence`` marker: a test that asserts one documented difference from core (its row id)."""

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "divergence(row): checks the docs/COMPATIBILITY.md row with this id")
