"""The replay agent: a local OpenAI Responses API server (streaming SSE, 127.0.0.1 only) that plays
a scenario file, so the real `codex exec` runs offline end to end — for the demo, for tests, and
for workflow authors who want to check a workflow's wiring without spending tokens.

Routing: the executor points codex at `http://127.0.0.1:<port>/d/<delivery>/<node>/v1`, so each
request names its node; each new codex thread (one attempt) takes the node's next scripted attempt.
Plain Python: nothing here imports dagster.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import UsageError

ROUTE = re.compile(r"^/d/(?P<delivery>[^/]+)/(?P<node>[^/]+)/v1/responses$")
HANG_S = 3600.0


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Usage(Strict):
    input_tokens: int = Field(default=1000, ge=0)
    cached_input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=200, ge=0)
    reasoning_output_tokens: int = Field(default=0, ge=0)


class Turn(Strict):
    """One model response: a tool call, a final message, or a failure mode."""

    shell: str | None = None
    apply_patch: str | None = None
    message: str | None = None
    fail: Literal["http-500", "http-400", "response-failed"] | None = None
    hang: bool = False
    sleep_s: float = Field(default=0.0, ge=0)
    usage: Usage = Usage()

    @model_validator(mode="after")
    def _one_action(self) -> Turn:
        actions = [self.shell, self.apply_patch, self.message, self.fail]
        if sum(a is not None for a in actions) + int(self.hang) != 1:
            raise ValueError("a turn has exactly one of `shell`, `apply_patch`, `message`, "
                             "`fail` or `hang: true`")
        return self


class Scenario(Strict):
    """Per node id (or `<delivery>/<node>`): attempts in order, each a list of turns."""

    kind: Literal["replay-scenario"] = "replay-scenario"
    nodes: dict[str, list[list[Turn]]]


def load_scenario(path: Path) -> Scenario:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise UsageError(f"{path}: cannot read the replay scenario ({err})") from err
    try:
        return Scenario.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise UsageError(f"{path}: {where}: {first['msg'].removeprefix('Value error, ')}; "
                         "see `specops replay-server --help`") from err


def sse(events: list[dict]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def usage_payload(u: Usage) -> dict:
    return {"input_tokens": u.input_tokens,
            "input_tokens_details": {"cached_tokens": u.cached_input_tokens},
            "output_tokens": u.output_tokens,
            "output_tokens_details": {"reasoning_tokens": u.reasoning_output_tokens},
            "total_tokens": u.input_tokens + u.output_tokens}


class ReplayState:
    """Which attempt each thread plays and how far it got; a log of every request."""

    def __init__(self, scenario: Scenario, log_path: Path | None) -> None:
        self.scenario = scenario
        self.log_path = log_path
        self.lock = threading.Lock()
        self.attempts_started: dict[str, int] = {}
        self.threads: dict[str, tuple[str, int, int]] = {}  # thread -> (key, attempt, next turn)
        self.counter = 0

    def script_key(self, delivery: str, node: str) -> str | None:
        for key in (f"{delivery}/{node}", node):
            if key in self.scenario.nodes:
                return key
        return None

    def next_turn(self, delivery: str, node: str, thread: str) -> Turn | str:
        """The turn to play, or an error text when the scenario has nothing for this request."""
        with self.lock:
            self.counter += 1
            key = self.script_key(delivery, node)
            if key is None:
                return f"replay scenario has no entry for node `{node}`"
            if thread not in self.threads:
                n = self.attempts_started.get(key, 0)
                self.attempts_started[key] = n + 1
                self.threads[thread] = (key, n, 0)
            key, attempt, index = self.threads[thread]
            attempts = self.scenario.nodes[key]
            if attempt >= len(attempts):
                return (f"replay scenario for `{key}` has {len(attempts)} attempt(s), not "
                        f"{attempt + 1}")
            turns = attempts[attempt]
            self.threads[thread] = (key, attempt, index + 1)
            if index >= len(turns):
                return Turn(message=f"replay: the scripted turns of `{key}` attempt "
                                    f"{attempt + 1} are used up")
            return turns[index]

    def log(self, entry: dict) -> None:
        if self.log_path is None:
            return
        with self.lock, open(self.log_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")


class Handler(BaseHTTPRequestHandler):
    server: ReplayServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # quiet: the request log says it all
        return

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        match = ROUTE.match(self.path)
        if not match:
            self.reply(404, b'{"error": {"message": "unknown path"}}', "application/json")
            return
        request = json.loads(body or b"{}")
        thread = self.headers.get("thread-id") or self.headers.get("session-id") or "single"
        delivery, node = match["delivery"], match["node"]
        turn = self.server.state.next_turn(delivery, node, thread)
        self.server.state.log({"delivery": delivery, "node": node, "thread": thread,
                               "turn": turn.model_dump(exclude_defaults=True)
                               if isinstance(turn, Turn) else {"error": turn},
                               "input": request.get("input", []),
                               "tools": [t.get("name") for t in request.get("tools", [])]})
        if isinstance(turn, str):
            self.reply(400, json.dumps({"error": {"message": turn}}).encode(), "application/json")
            return
        if turn.sleep_s:
            time.sleep(turn.sleep_s)
        if turn.hang:
            time.sleep(HANG_S)
            return
        if turn.fail in ("http-500", "http-400"):
            code = 500 if turn.fail == "http-500" else 400
            self.reply(code, b'{"error": {"message": "replay: scripted failure"}}',
                       "application/json")
            return
        self.reply(200, sse(self.events(turn, request)), "text/event-stream")

    def events(self, turn: Turn, request: dict) -> list[dict]:
        n = self.server.state.counter
        rid = f"resp_{n}"
        events: list[dict] = [{"type": "response.created", "response": {"id": rid}}]
        if turn.fail == "response-failed":
            return events + [{"type": "response.failed", "response": {
                "id": rid, "error": {"code": "server_error",
                                     "message": "replay: scripted response.failed"}}}]
        tools = {t.get("name") for t in request.get("tools", [])}
        if turn.shell is not None:
            item = {"type": "function_call", "call_id": f"call_{n}", "name": "exec_command",
                    "arguments": json.dumps({"cmd": turn.shell})}
        elif turn.apply_patch is not None and "apply_patch" in tools:
            item = {"type": "custom_tool_call", "call_id": f"call_{n}", "name": "apply_patch",
                    "input": turn.apply_patch}
        elif turn.apply_patch is not None:  # models without the tool: codex intercepts the heredoc
            item = {"type": "function_call", "call_id": f"call_{n}", "name": "exec_command",
                    "arguments": json.dumps({"cmd": f"apply_patch <<'EOF'\n{turn.apply_patch}EOF"})}
        else:
            item = {"type": "message", "role": "assistant", "id": f"msg_{n}",
                    "content": [{"type": "output_text", "text": turn.message}]}
        return events + [{"type": "response.output_item.done", "item": item},
                         {"type": "response.completed",
                          "response": {"id": rid, "usage": usage_payload(turn.usage)}}]

    def reply(self, code: int, payload: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        try:
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass


class ReplayServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, scenario: Scenario, port: int = 0, log_path: Path | None = None) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.state = ReplayState(scenario, log_path)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> ReplayServer:
        threading.Thread(target=self.serve_forever, name="replay-server", daemon=True).start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


def provider_base_url(replay_url: str, delivery: str, node: str) -> str:
    return f"{replay_url.rstrip('/')}/d/{delivery}/{node}/v1"
