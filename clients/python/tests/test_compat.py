"""Which majors this run has: test.sh runs the adapters' suites twice, the second
time with limits 4 and pyrate-limiter 3 ahead on PYTHONPATH; this says which."""

from __future__ import annotations

import os
from importlib.metadata import version

import limits
import pyrate_limiter


def test_the_versions_under_test() -> None:
    overlay = os.environ.get("PYTHONPATH", "").endswith("python-compat")
    expected = ("4.8.0", "3.9.0") if overlay else ("5.8.0", "4.5.1")
    assert (limits.__version__, version("pyrate-limiter")) == expected
    assert pyrate_limiter.__file__ and ("python-compat" in pyrate_limiter.__file__) is overlay
