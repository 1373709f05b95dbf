"""`specops ui`: the Dagster UI of one harness root — `dagster dev` on 127.0.0.1 with the
workspace specops ships — started with everything a run it launches needs: SPECOPS_ROOT,
DAGSTER_HOME and, in a `specops demo` root, the URL of a replay agent that serves the demo's
scenario (as `specops run` there does, `demo_replay`). It replaces this process with
`dagster dev` and decides nothing about runs. The replay agent is imported only in a demo root.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from specops_dag.builtin import WORKSPACE
from specops_dag.errors import ToolMissing

if TYPE_CHECKING:
    from specops_dag.agent.replay import ReplayServer

HOST = "127.0.0.1"
DEMO_MARK = Path(".specops") / "demo-scenario.yaml"  # a demo root's copy of what it plays
REPLAY_LOG = Path(".specops") / "replay-requests.jsonl"


def demo_replay_server(root: Path) -> ReplayServer | None:
    """A replay agent bound to a free port on 127.0.0.1 for a demo root's scenario (not yet
    serving), logging to `.specops/replay-requests.jsonl`; None for any other root, and where
    SPECOPS_REPLAY_URL already names the agent to use."""
    if not (root / DEMO_MARK).is_file() or os.environ.get("SPECOPS_REPLAY_URL"):
        return None
    from specops_dag.agent.replay import ReplayServer, load_scenario

    return ReplayServer(load_scenario(root / DEMO_MARK), log_path=root / REPLAY_LOG)


def replay_note(root: Path, url: str) -> str:
    return (f"demo root: the replay agent on {url} plays {root / DEMO_MARK}; no model provider "
            "is called")


@contextmanager
def demo_replay(root: Path, say: Callable[[str], None]) -> Iterator[None]:
    """While the block runs, in a demo root: the replay agent serving its scenario, its URL in
    SPECOPS_REPLAY_URL (which the run's Dagster process inherits). Elsewhere, nothing."""
    server = demo_replay_server(root)
    if server is None:
        yield
        return
    server.start()
    say(replay_note(root, server.url))
    os.environ["SPECOPS_REPLAY_URL"] = server.url
    try:
        yield
    finally:
        os.environ.pop("SPECOPS_REPLAY_URL", None)
        server.stop()


def dagster_bin() -> Path:
    """The `dagster` of this Python environment (the one that has specops installed)."""
    return Path(sys.executable).parent / "dagster"


def ui_argv(port: int) -> list[str]:
    return [str(dagster_bin()), "dev", "-w", str(WORKSPACE), "-h", HOST, "-p", str(port)]


def ui_env(root: Path, home: Path, replay_url: str | None) -> dict[str, str]:
    env = {**os.environ, "SPECOPS_ROOT": str(root), "DAGSTER_HOME": str(home)}
    if replay_url:
        env["SPECOPS_REPLAY_URL"] = replay_url
    return env


def serve_beside(server: ReplayServer) -> None:
    """Serve the replay agent from a fork of this process, which ends once its parent — this
    process, soon `dagster dev` under the same pid — is gone. A thread would not outlive the
    exec, and the replay agent must serve every run the UI and its daemon launch."""
    sys.stdout.flush()
    sys.stderr.flush()
    if os.fork() != 0:
        server.server_close()  # the fork serves it; `dagster dev` must not hold the port
        return
    try:
        # Ctrl-C stops `dagster dev`, which ends its runs; the agent answers them until then.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        parent = os.getppid()
        threading.Thread(target=server.serve_forever, name="replay-server", daemon=True).start()
        while os.getppid() == parent:
            time.sleep(0.5)
    finally:
        os._exit(0)


def exec_ui(root: Path, home: Path, port: int, server: ReplayServer | None,
            say: Callable[[str], None]) -> NoReturn:
    """Become `dagster dev` for `root`, with `server` (a demo root's replay agent, bound but
    not serving yet) served beside it."""
    argv = ui_argv(port)
    if not Path(argv[0]).is_file():
        raise ToolMissing(f"`dagster` is not installed beside this Python ({argv[0]}); install "
                          "specops-dag with its dependencies into this environment")
    if server is not None:
        serve_beside(server)
    env = ui_env(root, home, server.url if server is not None else None)
    say(f"Dagster UI: http://{HOST}:{port} for harness root {root} (DAGSTER_HOME={home}); "
        "Ctrl-C stops it")
    sys.stdout.flush()
    # A shell starts a background job with SIGINT ignored, and `dagster dev` makes SIGTERM do
    # what SIGINT does: with both ignored nothing but SIGKILL would stop it and its children.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.chdir(root)
    os.execve(argv[0], argv, env)
