"""The kit as a published package: a wheel and an sdist built with `python -m build`,
each installed into a fresh venv (not this one, not editable), a request sent through
it to a real module-enabled server, and the install surviving an app's later
`pip install -r requirements.txt`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path
from typing import Iterator, Tuple

import pytest

from conftest import KIT_DIR, Server

APP = """
import sys
from redis_rl import FailurePolicy, Limit, RateLimiter, connect
import redis_rl
rl = RateLimiter(connect(sys.argv[1]), failure=FailurePolicy.CLOSED)
limit = Limit.fixed("pkg", "rl:{package-test}", 2, 60)
rl.reset(limit)
print(redis_rl.__file__)
print([rl.check(limit).allowed for _ in range(3)])
# The installed copy's Lua scripts, whether or not the server has the module.
lua = RateLimiter(connect(sys.argv[1]), failure=FailurePolicy.CLOSED, backend="scripts")
lua.reset(limit)
print("scripts", [lua.check(limit).allowed for _ in range(3)])
"""


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Tuple[Path, Path]:
    out = tmp_path_factory.mktemp("dist")
    # From a copy, so the build's scratch (build/, *.egg-info) stays out of the tree;
    # --no-isolation: the build backend (setuptools) comes from this venv, not a download per run.
    source = tmp_path_factory.mktemp("source") / "python"
    shutil.copytree(KIT_DIR, source, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__", "build", "dist"))
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
                   check=True, capture_output=True, timeout=300)
    [wheel] = out.glob("redis_rl-*.whl")
    [sdist] = out.glob("redis[-_]rl-*.tar.gz")  # setuptools < 69 keeps the hyphen
    return wheel, sdist


def test_artifacts_carry_the_metadata(dist: Tuple[Path, Path]) -> None:
    wheel, sdist = dist
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        metadata = z.read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert "redis_rl/py.typed" in names and "redis_rl/limits_storage.py" in names
    # Every data file the package ships (the Lua scripts, where the tree has them).
    for data in (KIT_DIR / "src" / "redis_rl").glob("scripts/*.lua"):
        assert f"redis_rl/scripts/{data.name}" in names, data
    assert any(n.endswith("LICENSE") for n in names)
    assert "Name: redis-rl" in metadata and "Requires-Dist: redis>=5" in metadata
    assert "License :: OSI Approved :: MIT License" in metadata
    with tarfile.open(sdist) as t:
        members = t.getnames()
    assert any(m.endswith("/LICENSE") for m in members) and any(m.endswith("/src/redis_rl/py.typed") for m in members)


def fresh_venv(where: Path) -> Path:
    venv.EnvBuilder(with_pip=True).create(where)
    return where / "bin" / "python"


def pip(python: Path, *args: str, cwd: Path) -> None:
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
                   check=True, cwd=cwd, timeout=300, env={**os.environ, "PIP_NO_INPUT": "1"})


@pytest.fixture(params=["wheel", "sdist"])
def installed(request: pytest.FixtureRequest, dist: Tuple[Path, Path], tmp_path: Path) -> Iterator[Tuple[Path, Path]]:
    artifact = dist[0] if request.param == "wheel" else dist[1]
    python = fresh_venv(tmp_path / "venv")
    pip(python, str(artifact), cwd=tmp_path)
    yield python, tmp_path


def run_app(python: Path, app_dir: Path, server: Server) -> str:
    (app_dir / "app.py").write_text(APP)
    done = subprocess.run([str(python), "app.py", server.url], cwd=app_dir, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_installed_artifact_serves_a_request(installed: Tuple[Path, Path], server: Server) -> None:
    python, app_dir = installed
    out = run_app(python, app_dir, server)
    assert "site-packages" in out and str(KIT_DIR) not in out  # the installed copy, not this tree
    assert "[True, True, False]" in out
    assert "scripts [True, True, False]" in out
    # The app's own requirements installed afterwards leave the kit in place.
    (app_dir / "requirements.txt").write_text("redis>=5\n")
    pip(python, "-r", "requirements.txt", cwd=app_dir)
    assert "[True, True, False]" in run_app(python, app_dir, server)
