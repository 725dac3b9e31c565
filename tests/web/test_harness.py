"""The browser tests' harness: without a browser they skip and say what to install, except under CI=true."""

from __future__ import annotations

import pytest

from tests.web.conftest import INSTALL_HINT, _missing


def test_missing_browser_skips_naming_the_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as caught:
        _missing("chromium or chromedriver is not installed")
    assert str(caught.value) == f"chromium or chromedriver is not installed: {INSTALL_HINT}"
    assert "apt-get install chromium chromium-driver" in INSTALL_HINT


def test_missing_browser_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as caught:
        _missing("chromium or chromedriver is not installed")
    assert str(caught.value) == f"CI=true but chromium or chromedriver is not installed: {INSTALL_HINT}"
