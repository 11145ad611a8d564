"""SlowAPI's suite with its storage swapped: its tests use the default `memory://`,
which becomes the store under test on our server."""

from __future__ import annotations

import pytest

import rl_shim


def pytest_configure(config: pytest.Config) -> None:
    import slowapi.extension

    rl_shim.swap_storage_uris(slowapi.extension, ["memory://", "async+memory://"])
