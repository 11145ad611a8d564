"""Real servers for the tests: one standalone, one without the module, and a 3-node
cluster, each started once per session on free loopback ports and killed at the end.

RL_BACKEND chooses what decides: `module` (default) loads the module into `server`
and `cluster`; `scripts` starts them without it, so every limiter (backend `auto`,
the default) runs the Lua scripts, the same tests expecting the same answers."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence

import pytest
import redis

KIT_DIR = Path(__file__).resolve().parent.parent
MODULE = Path(os.environ.get("RL_MODULE", KIT_DIR / "../../target/release/libredis_rl.so")).resolve()
SERVER = os.environ.get("RL_SERVER", "redis-server")
SECRET = "some-test-secret"
BACKEND = os.environ.get("RL_BACKEND", "module")
if BACKEND not in ("module", "scripts"):
    raise RuntimeError(f"RL_BACKEND must be 'module' or 'scripts', not {BACKEND!r}")
ON_MODULE = BACKEND == "module"
SCRIPTS_DIR = KIT_DIR / "src/redis_rl/scripts"
START_TIMEOUT = 10.0
CLUSTER_TIMEOUT = 30.0

# A fixed instant (2024-06-17 07:29:09.8 UTC) so replies are exact numbers.
T0 = 1_718_609_349_800_000


class FakeClock:
    """Unix µs that only move when told: the NOW the kit sends and the deny
    cache's timeline, stepped by the tests instead of sleeping."""

    def __init__(self, now_us: int = T0) -> None:
        self.now_us = now_us

    def __call__(self) -> int:
        return self.now_us

    def advance_ms(self, ms: int) -> None:
        self.now_us += ms * 1000


def free_port(also_free: int = 0) -> int:
    """A free loopback port whose `port + also_free` is free too (cluster bus)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + also_free > 65535:
            continue
        if not also_free:
            return port
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + also_free))
            except OSError:
                continue
        return port


@dataclass
class Server:
    port: int
    process: subprocess.Popen
    dir: str
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = Path(self.dir) / "server.log"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, decode_responses=True)

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(timeout=5)
        shutil.rmtree(self.dir, ignore_errors=True)


def start_server(*, module: bool = True, cluster: bool = False, port: int = 0, extra: Sequence[str] = ()) -> Server:
    if module and not MODULE.is_file():
        pytest.exit(f"module not found at {MODULE}: build it (cargo build --release) or set RL_MODULE", 2)
    port = port or free_port(10000 if cluster else 0)
    workdir = tempfile.mkdtemp(prefix="rl-kit-")
    args = [SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", workdir, "--logfile", "server.log"]
    if cluster:
        args += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
    if module:
        args += ["--loadmodule", str(MODULE)]
    args += extra
    env = {**os.environ, "RL_SECRET": SECRET}
    process = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = Server(port, process, workdir)
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            if redis.Redis(port=port, socket_timeout=1).ping():
                return server
        except redis.ConnectionError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            log = server.log.read_text() if server.log.exists() else ""
            server.stop()
            raise RuntimeError(f"{SERVER} on port {port} did not start:\n{log}")
        time.sleep(0.05)


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    """The tests' server: with the module, or (RL_BACKEND=scripts) without."""
    s = start_server(module=ON_MODULE)
    yield s
    s.stop()


def rl_command(client: redis.Redis, *args: Any) -> Any:
    """A module command sent as is, or on the scripts backend run as its script (EVAL,
    no KEYS, which a standalone server allows): the server's own answer, for tests that
    compare the kit with it."""
    if ON_MODULE:
        return client.execute_command(*args)
    body = (SCRIPTS_DIR / f"{str(args[0]).lower().removeprefix('rl.')}.lua").read_text()
    return client.execute_command("EVAL", body, 0, *args[1:])


def limiter_calls(client: redis.Redis) -> Dict[str, int]:
    """The limiter calls a server answered without error, by command: RL.* on the
    module; on the scripts, which the server's stats cannot tell apart, as `script`
    (EVALSHA and EVAL, not counting an EVALSHA refused with NOSCRIPT)."""
    calls: Dict[str, int] = {}
    for name, stat in client.info("commandstats").items():
        command = name.removeprefix("cmdstat_")
        ok = stat["calls"] - stat.get("failed_calls", 0)
        if command.startswith("rl."):
            calls[command] = ok
        elif command in ("evalsha", "eval") and ok:
            calls["script"] = calls.get("script", 0) + ok
    return calls


def total_calls(client: redis.Redis) -> int:
    return sum(limiter_calls(client).values())


@pytest.fixture(scope="session")
def module_server(server: Server) -> Iterator[Server]:
    """A server with the module, whatever RL_BACKEND says (to compare the two)."""
    if ON_MODULE:
        yield server
        return
    s = start_server()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def bare_server() -> Iterator[Server]:
    """A server without the module: every RL.* is an unknown command."""
    s = start_server(module=False)
    yield s
    s.stop()


@dataclass
class Cluster:
    nodes: List[Server]

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def clients(self) -> List[redis.Redis]:
        return [n.client() for n in self.nodes]


def _cluster_ready(nodes: List[Server]) -> bool:
    try:
        for node in nodes:
            c = node.client()
            if c.cluster("info")["cluster_state"] != "ok":
                return False
            if len(c.cluster("nodes")) != len(nodes):
                return False
        return True
    except redis.RedisError:
        return False


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    nodes = [start_server(cluster=True, module=ON_MODULE) for _ in range(3)]
    try:
        subprocess.run(
            ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in nodes),
             "--cluster-replicas", "0", "--cluster-yes"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=CLUSTER_TIMEOUT,
        )
        deadline = time.monotonic() + CLUSTER_TIMEOUT
        while not _cluster_ready(nodes):
            if time.monotonic() > deadline:
                raise RuntimeError("the cluster did not reach cluster_state:ok")
            time.sleep(0.1)
        yield Cluster(nodes)
    finally:
        for n in nodes:
            n.stop()


def supports_all(client: redis.Redis) -> Optional[str]:
    """None when the module has RL.ALL, REFUND and RESET; else why not."""
    try:
        rl_command(client, "RL.ALL", 1, "FIXED", "{probe}", 1, 1, "PEEK")
        rl_command(client, "RL.FIXED", "{probe}", 1, 1, "RESET")
    except redis.ResponseError as exc:
        return f"this build of the module lacks RL.ALL/REFUND/RESET ({exc})"
    return None


@pytest.fixture(scope="session")
def needs_all(server: Server) -> None:
    reason = supports_all(server.client())
    if reason:
        pytest.skip(reason)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def key(request: pytest.FixtureRequest) -> str:
    """A hash-tagged base key unique to the test."""
    return f"rl:{{{request.node.name}}}"
