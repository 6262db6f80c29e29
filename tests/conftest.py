"""Shared test setup: offline, isolated cache, no real credentials, stub server importable."""

from __future__ import annotations

import pytest

#: native_isolation: embedded-model tests run forked (a native crash fails one test);
#: pytester: lets a test run an inner pytest session (used to check that isolation);
#: browser: the ``playwright`` fixture (headless Debian chromium) of the browser tests
pytest_plugins = ("native_isolation", "pytester", "browser")


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path_factory, monkeypatch):
    """Every test gets its own cache file and no real API keys or proxies."""
    cache_dir = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("CAREBENCH_CACHE", str(cache_dir / "completions.sqlite"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "CAREBENCH_API_KEY", "CAREBENCH_PRICES"):
        monkeypatch.delenv(var, raising=False)
    from carebench.models.pricing import price_table

    price_table.cache_clear()
    yield
    price_table.cache_clear()


@pytest.fixture
def price_per_call(tmp_path, monkeypatch):
    """``price_per_call(usd, *models)``: price those model names at a flat USD per call
    (through ``CAREBENCH_PRICES``, as a user would)."""
    from carebench.models.pricing import price_table

    def set_prices(usd: float, *models: str) -> None:
        path = tmp_path / "prices.toml"
        path.write_text("[models]\n" + "".join(f'"{m}" = [0.0, 0.0, {usd}]\n' for m in models))
        monkeypatch.setenv("CAREBENCH_PRICES", str(path))
        price_table.cache_clear()

    return set_prices
