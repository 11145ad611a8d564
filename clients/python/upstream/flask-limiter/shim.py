"""Flask-Limiter's whole suite with its Redis storage swapped: the suite's docker
Redis (`redis://localhost:46379`) becomes the store under test on our server. The
tests on the default `memory://` stay on it (they travel in time with `hiro`, which a
server-side store cannot follow: on the stock Redis store 45 of them fail). Memcached
and MongoDB tests keep their (absent) servers: they fail the same on the stock store."""

from __future__ import annotations

import pytest

import rl_shim

rl_shim.FIXED_ADDRESSES.append("localhost:46379")


def pytest_configure(config: pytest.Config) -> None:
    import flask_limiter._extension

    rl_shim.swap_storage_uris(flask_limiter._extension, ["redis://localhost:46379"])
