"""The replay agent: a local OpenAI Responses API server (streaming SSE, 127.0.0.1 only) that plays
a scenario file, so the real `codex exec` runs offline end to end — for the demo, for tests, and
for workflow authors who want to check a workflow's wiring without spending tokens.

Routing: the executor points codex at `http://127.0.0.1:<port>/d/<delivery>/<node>/v1`, so each
request names its node; each new codex thread (one attempt) takes the node's next scripted attempt.
An attempt is either a list of turns or a literal agent (`{literal: {...}}`) that acts only on the
prompt text codex sends: it reads every READ / SKILLS / step-details path and writes every WRITE
path from its cwd, never using `SPECOPS_*` or the product's folder conventions.
Plain Python: nothing here imports dagster.
"""

from __future__ import annotations

import json
import re
import shlex
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath
from typing import Annotated, Literal

import yaml
from pydantic import (
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from specops_dag.errors import UsageError
from specops_dag.workflow.strict import Strict

ROUTE = re.compile(r"^/d/(?P<delivery>[^/]+)/(?P<node>[^/]+)/v1/responses$")
HANG_S = 3600.0


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
    fail: Literal["http-500", "http-503", "http-429", "http-400", "response-failed"] | None = None
    hang: bool = False
    # exec_command's own argument: how long codex waits for the command before it answers the
    # model with "Process running with session ID …" (codex's default is 10 s).
    yield_time_ms: int | None = Field(default=None, ge=0)
    tty: bool = False  # exec_command's `tty`: an interactive session the model could type into
    sleep_s: float = Field(default=0.0, ge=0)
    usage: Usage = Usage()

    @model_validator(mode="after")
    def _one_action(self) -> Turn:
        actions = [self.shell, self.apply_patch, self.message, self.fail]
        if sum(a is not None for a in actions) + int(self.hang) != 1:
            raise ValueError("a turn has exactly one of `shell`, `apply_patch`, `message`, "
                             "`fail` or `hang: true`")
        return self


class LiteralPlay(Strict):
    """The literal agent of one attempt: `before` turns first, then it reads what the prompt's
    READ / SKILLS / `Step details:` name and writes what its WRITE names (see `literal_turn`),
    and with `risk` set, the file its `RISK:` line names. Path suffixes in `files` and `skip`
    match the end of a WRITE path as the prompt spells it."""

    before: list[Turn] = []
    files: dict[str, str] = {}  # suffix -> content (the longest suffix wins; ends with a newline)
    skip: list[str] = []  # suffixes of WRITE paths left unwritten
    risk: str | None = None  # written to the prompt's RISK path with the WRITE files (ends "\n")
    review: str | None = None  # an evaluator's final message, verbatim
    usage: Usage = Usage()

    @field_validator("before")
    @classmethod
    def _tool_calls_only(cls, before: list[Turn]) -> list[Turn]:
        for i, turn in enumerate(before):
            if turn.shell is None and turn.apply_patch is None:
                raise ValueError(f"item {i} is not a tool call: `before` holds `shell` or "
                                 "`apply_patch` turns only, since a message, failure or hang "
                                 "ends the codex turn before the literal agent acts")
        return before

    @model_validator(mode="after")
    def _consistent(self) -> LiteralPlay:
        if "" in self.files or "" in self.skip:
            raise ValueError("an empty path suffix matches every WRITE path; name the suffix")
        if both := sorted(set(self.files) & set(self.skip)):
            raise ValueError(f"path suffix `{both[0]}` is in both `files` and `skip`; keep one")
        return self


class LiteralAttempt(Strict):
    literal: LiteralPlay


def attempt_kind(value: object) -> str | None:
    if isinstance(value, list):
        return "scripted"
    return "literal" if isinstance(value, dict | LiteralAttempt) else None


ATTEMPT_TAGS = ("scripted", "literal")
Attempt = Annotated[
    Annotated[list[Turn], Tag("scripted")] | Annotated[LiteralAttempt, Tag("literal")],
    Discriminator(attempt_kind, custom_error_type="attempt_kind",
                  custom_error_message="an attempt is a list of turns or `{literal: {...}}`")]


class Scenario(Strict):
    """Per node id (or `<delivery>/<node>`, or `*` for any node not named): attempts in order,
    each a list of turns or a literal agent. A node asked for more attempts than it lists gets
    an error naming the count, or with `repeat: true` its last attempt again: the demo's
    scenario answers a node reopened and run again, however often."""

    kind: Literal["replay-scenario"] = "replay-scenario"
    repeat: bool = False
    nodes: dict[str, list[Attempt]]


def load_scenario(path: Path) -> Scenario:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise UsageError(f"{path}: cannot read the replay scenario ({err})") from err
    try:
        return Scenario.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        loc = list(first["loc"])
        if len(loc) > 3 and loc[0] == "nodes" and loc[3] in ATTEMPT_TAGS:
            del loc[3]  # the union's tag, not a key of the file
        where = ".".join(str(p) for p in loc) or "(top level)"
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


@dataclass(frozen=True)
class Play:
    """What the server answers one request with: a turn, or an error text when the scenario has
    nothing for it; `decision` is the literal agent's, for the request log."""

    turn: Turn | None
    error: str | None = None
    decision: dict | None = None


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
        for key in (f"{delivery}/{node}", node, "*"):
            if key in self.scenario.nodes:
                return key
        return None

    def next_turn(self, delivery: str, node: str, thread: str, items: list | None = None) -> Play:
        """The turn to play for this request (`items`: its `input`)."""
        with self.lock:
            self.counter += 1
            key = self.script_key(delivery, node)
            if key is None:
                return Play(None, f"replay scenario has no entry for node `{node}`")
            if thread not in self.threads:  # `*` counts the attempts of each node apart
                counter = f"{delivery}/{node}" if key == "*" else key
                n = self.attempts_started.get(counter, 0)
                self.attempts_started[counter] = n + 1
                self.threads[thread] = (key, n, 0)
            key, attempt, index = self.threads[thread]
            attempts = self.scenario.nodes[key]
            if attempt >= len(attempts) and self.scenario.repeat and attempts:
                attempt = len(attempts) - 1
            if attempt >= len(attempts):
                return Play(None, f"replay scenario for `{key}` has {len(attempts)} attempt(s), "
                                  f"not {attempt + 1}")
            self.threads[thread] = (key, attempt, index + 1)
            script = attempts[attempt]
        if isinstance(script, LiteralAttempt):
            play = script.literal
            if index < len(play.before):
                return Play(play.before[index])
            return literal_turn(play, items or [])
        if index >= len(script):
            return Play(Turn(message=f"replay: the scripted turns of `{key}` attempt "
                                     f"{attempt + 1} are used up"))
        return Play(script[index])

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
        items = request.get("input", [])
        play = self.server.state.next_turn(delivery, node, thread, items)
        turn = play.turn
        self.server.state.log({"delivery": delivery, "node": node, "thread": thread,
                               "turn": turn.model_dump(exclude_defaults=True)
                               if turn is not None else {"error": play.error},
                               **({"literal": play.decision} if play.decision else {}),
                               "input": items,
                               "tools": [t.get("name") for t in request.get("tools", [])]})
        if turn is None:
            self.reply(400, json.dumps({"error": {"message": play.error}}).encode(),
                       "application/json")
            return
        if turn.sleep_s:
            time.sleep(turn.sleep_s)
        if turn.hang:
            time.sleep(HANG_S)
            return
        if turn.fail in ("http-500", "http-503", "http-429", "http-400"):
            code = int(turn.fail.removeprefix("http-"))
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
                    "arguments": json.dumps({"cmd": turn.shell, **(
                        {"yield_time_ms": turn.yield_time_ms} if turn.yield_time_ms is not None
                        else {}), **({"tty": True} if turn.tty else {})})}
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


# -- the literal agent: it knows the prompt text codex sends and its cwd, nothing else ----------

PROMPT_MARK = "READ (in order):"
READ_MARK, WRITE_MARK = "# replay literal: read", "# replay literal: write"
CHANGES_MARK = "# replay literal: changes"
CHANGES_LINE = re.compile(r"^CHANGES:.*?`(?P<command>[^`]+)`")
NUMBERED = re.compile(r"^\d+\.\s+(?P<item>.+)$")
BULLET = re.compile(r"^-\s+(?P<item>.+)$")
SKILL_ITEM = re.compile(r"^-\s+[^:`]+:\s+`[^`]*`\s+(?P<item>.+)$")
CRITERION = re.compile(r"^-\s+`(?P<id>[^`]+)`\s+\(threshold\s+\d+/10\)")
STEP_DETAILS = re.compile(r"^Step details:\s+(?P<item>.+)$")
RISK_LINE = re.compile(r"^RISK:\s+(?P<item>.+)$")
PATH_END = re.compile(r" \(| — ")
EXIT_CODE = re.compile(r"^Process exited with code (?P<code>-?\d+)\s*$", re.MULTILINE)
LITERAL_YIELD_MS = 30_000  # codex answers "Process running …" instead of an exit code after this
MESSAGE_LIMIT = 1000


@dataclass(frozen=True)
class StepPrompt:
    """What the literal agent takes from the product's prompt; paths as the prompt spells them."""

    header: str
    reads: tuple[str, ...] = ()
    skills: tuple[str, ...] = ()
    step_details: str | None = None
    writes: tuple[str, ...] = ()
    risk: str | None = None  # where a risk is raised (the `RISK:` line), if the prompt says
    criteria: tuple[str, ...] = ()
    evaluator: bool = False
    changes: str | None = None  # the command the `CHANGES:` line names, if the prompt has one

    @property
    def to_read(self) -> list[str]:
        """Everything to read, in prompt order: READ, SKILLS, then the step details."""
        return [*self.reads, *self.skills, *([self.step_details] if self.step_details else [])]


def path_of(item: str) -> str:
    """A list item's path: its text up to the first ` (` or ` — `, else all of it."""
    return PATH_END.split(item, maxsplit=1)[0].strip()


def section(lines: list[str], header: str) -> list[str]:
    """The stripped lines after the first line starting with `header`, up to a blank line."""
    start = next((i for i, line in enumerate(lines) if line.strip().startswith(header)), None)
    if start is None:
        return []
    out: list[str] = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        out.append(line.strip())
    return out


def items_of(lines: list[str], header: str, pattern: re.Pattern[str]) -> tuple[str, ...]:
    found = (pattern.match(line) for line in section(lines, header))
    return tuple(p for m in found if m is not None and (p := path_of(m["item"])))


def parse_prompt(text: str) -> StepPrompt:
    """The current step of a prompt: everything from its last `READ (in order):` line on (what
    comes before is AGENTS.md, work rules and context, which may quote anything)."""
    lines = text.splitlines()
    marks = [i for i, line in enumerate(lines) if line.strip() == PROMPT_MARK]
    start = marks[-1] if marks else 0
    header = next((line.strip() for line in reversed(lines[:start])
                   if line.startswith("# Current step")), "(no `# Current step` header)")
    body = lines[start:]
    details = next((m for line in body if (m := STEP_DETAILS.match(line.strip()))), None)
    risk = next((m for line in body if (m := RISK_LINE.match(line.strip()))), None)
    criteria = (CRITERION.match(line) for line in section(body, "Criteria"))
    changes = next((m["command"] for line in body if (m := CHANGES_LINE.match(line.strip()))),
                   None)
    return StepPrompt(header=header, reads=items_of(body, PROMPT_MARK, NUMBERED),
                      skills=items_of(body, "SKILLS", SKILL_ITEM),
                      step_details=path_of(details["item"]) if details else None,
                      writes=items_of(body, "WRITE:", BULLET),
                      risk=path_of(risk["item"]) if risk else None,
                      criteria=tuple(m["id"] for m in criteria if m is not None),
                      evaluator=any(line.strip() == "<<<REVIEW" for line in body),
                      changes=changes)


def message_text(item: dict) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(str(c.get("text") or "") for c in content or [] if isinstance(c, dict))


def find_prompt(items: list) -> str | None:
    """The product's prompt: the last user message with a `READ (in order):` line (codex's own
    AGENTS.md and `<environment_context>` messages have none)."""
    texts = [message_text(i) for i in items if isinstance(i, dict) and i.get("role") == "user"]
    found = [t for t in texts if any(line.strip() == PROMPT_MARK for line in t.splitlines())]
    return found[-1] if found else None


def own_mark(arguments: object) -> str | None:
    try:
        cmd = json.loads(str(arguments)).get("cmd")
    except (json.JSONDecodeError, AttributeError):
        return None
    first = str(cmd).split("\n", 1)[0]
    return first if first in (READ_MARK, WRITE_MARK, CHANGES_MARK) else None


def literal_calls(items: list) -> dict[str, str | None]:
    """The literal agent's own commands in the conversation: mark -> codex's tool output (None
    until it answered). It learns what happened only from these outputs."""
    marks: dict[str, str] = {}
    outputs: dict[str, str | None] = {}
    for item in (i for i in items if isinstance(i, dict)):
        call = str(item.get("call_id"))
        if item.get("type") == "function_call" and (mark := own_mark(item.get("arguments"))):
            marks[call] = mark
            outputs[mark] = None
        elif item.get("type") == "function_call_output" and call in marks:
            out = item.get("output")
            outputs[marks[call]] = out if isinstance(out, str) else message_text({"content": out})
    return outputs


def exit_code(output: str) -> int | None:
    """The exit code codex reports (`Process exited with code N`, before the `Output:` part)."""
    found = EXIT_CODE.search(output.split("\nOutput:\n", 1)[0])
    return int(found["code"]) if found else None


def output_part(output: str) -> str:
    return output.split("\nOutput:\n", 1)[-1]


def shell_failures(output: str | None, paths: list[str], verb: str) -> list[str]:
    """The paths a literal command failed on: none on exit 0; those its summary names
    (`<verb>: <path>` lines), or all of them when it names none or never exited."""
    if output is not None and exit_code(output) == 0:
        return []
    lines = set(output_part(output or "").splitlines())
    return [p for p in paths if f"{verb}: {p}" in lines] or list(paths)


def record_failure(verb: str, quoted: str) -> str:
    # A literal newline inside the quotes: one `<verb>: <path>` line per failure, POSIX sh.
    return f'[ $? -eq 0 ] || failed="$failed\n{verb}: "{quoted}'


def summary_lines() -> list[str]:
    return ['if [ -n "$failed" ]; then printf \'%s\\n\' "$failed"; exit 1; fi']


def read_command(paths: list[str]) -> str:
    """Files with `cat`, folders (a trailing `/`) with `ls -la`; exit 1 naming each failure."""
    lines = [READ_MARK, "failed=''"]
    for path in paths:
        quoted = shlex.quote(path)
        lines += [f"printf '\\n==> %s <==\\n' {quoted}",
                  f"{'ls -la' if path.endswith('/') else 'cat'} -- {quoted}",
                  record_failure("CANNOT READ", quoted)]
    return "\n".join(lines + summary_lines())


def heredoc_tag(content: str) -> str:
    tag, lines, n = "SPECOPS_EOF", set(content.splitlines()), 0
    while tag in lines:
        n += 1
        tag = f"SPECOPS_EOF_{n}"
    return tag


def write_command(files: list[tuple[str, str]]) -> str:
    """Each file through a quoted heredoc (its content literal), parent folders created; a
    path with a trailing `/` is a folder. Exit 1 naming each failure."""
    lines = [WRITE_MARK, "failed=''"]
    for path, content in files:
        quoted = shlex.quote(path)
        if path.endswith("/"):
            lines.append(f"mkdir -p -- {quoted}")
        else:
            body = content if content.endswith("\n") else content + "\n"
            tag = heredoc_tag(body)
            parent = shlex.quote(str(PurePosixPath(path).parent))
            lines.append(f"mkdir -p -- {parent} && cat > {quoted} <<'{tag}'\n{body}{tag}")
        lines.append(record_failure("CANNOT WRITE", quoted))
    return "\n".join(lines + summary_lines() + ["printf 'WROTE: %s\\n' "
                                                + " ".join(shlex.quote(p) for p, _ in files)])


def default_content(path: str, prompt: StepPrompt) -> str:
    read = "\n".join(f"- {p}" for p in prompt.to_read) or "- (nothing)"
    return (f"# {path}\n\nWritten by the replay agent (literal mode) for:\n\n{prompt.header}\n\n"
            f"Read:\n{read}\n")


def planned_writes(play: LiteralPlay, prompt: StepPrompt) -> tuple[list[tuple[str, str]],
                                                                   list[str]]:
    """(path, content) of each WRITE path to write, and the paths `skip` leaves unwritten."""
    files, skipped = [], []
    for path in prompt.writes:
        if any(path.endswith(s) for s in play.skip):
            skipped.append(path)
            continue
        suffixes = sorted((s for s in play.files if path.endswith(s)), key=len)
        files.append((path, play.files[suffixes[-1]] if suffixes
                      else default_content(path, prompt)))
    if play.risk is not None and prompt.risk is not None:
        files.append((prompt.risk, play.risk))
    return files, skipped


def clipped(text: str, limit: int = MESSAGE_LIMIT) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def blocked_message(verb: str, failed: list[str], output: str | None) -> str:
    """`BLOCKED: cannot <verb> <paths>` and the output lines naming them, else the output's
    last lines (file bodies a read printed are not the news); its own markers left out."""
    shown = output_part(output or "(no tool output)")
    lines = [ln for ln in shown.splitlines()
             if ln.strip() and not ln.startswith(("==> ", "CANNOT ", "WROTE: "))]
    naming = [ln for ln in lines if any(p in ln for p in failed)]
    excerpt = "\n".join(naming or lines)[-600:] or "(the command printed nothing)"
    if output is not None and exit_code(output) is None:  # still running, or denied by a hook
        excerpt = f"no `Process exited with code` in the tool output:\n{output.strip()[:600]}"
    return clipped(f"BLOCKED: cannot {verb} {', '.join(failed)}\n{excerpt}")


def review_block(prompt: StepPrompt) -> str:
    read = prompt.to_read
    evidence = clipped(f"read {', '.join(read)}" if read else "nothing to read", 300)
    return "\n".join(["<<<REVIEW", "VERDICT: PASS",
                      *(f"SCORE {cid}: 10 — {evidence}" for cid in prompt.criteria),
                      "FINDINGS:", "- none", ">>>"])


def said(play: LiteralPlay, text: str, decision: dict) -> Play:
    return Play(Turn(message=text, usage=play.usage), decision=decision)


def ran(play: LiteralPlay, cmd: str, decision: dict) -> Play:
    return Play(Turn(shell=cmd, yield_time_ms=LITERAL_YIELD_MS, usage=play.usage),
                decision=decision)


def literal_turn(play: LiteralPlay, items: list) -> Play:
    """The literal agent's next turn, from the prompt and its own commands' outputs alone:
    read everything named, stop if anything is unreadable, run the command its CHANGES line
    names, then write (or review), then say so."""
    text = find_prompt(items)
    if text is None:
        return said(play, f"BLOCKED: no prompt with a `{PROMPT_MARK}` line; nothing to act on",
                    {"action": "blocked", "step": "prompt"})
    prompt = parse_prompt(text)
    calls, reads = literal_calls(items), prompt.to_read
    if reads and READ_MARK not in calls:
        return ran(play, read_command(reads), {"action": "read", "paths": reads})
    if reads and (failed := shell_failures(calls[READ_MARK], reads, "CANNOT READ")):
        return said(play, blocked_message("read", failed, calls[READ_MARK]),
                    {"action": "blocked", "step": "read", "failed": failed})
    if prompt.changes and CHANGES_MARK not in calls:  # what the prompt says shows the change
        return ran(play, f"{CHANGES_MARK}\n{prompt.changes}",
                   {"action": "changes", "command": prompt.changes})
    if prompt.evaluator:
        verbatim = play.review is not None
        return said(play, play.review if play.review is not None else review_block(prompt),
                    {"action": "review", "criteria": list(prompt.criteria), "verbatim": verbatim})
    files, skipped = planned_writes(play, prompt)
    paths = [p for p, _ in files]
    if files and WRITE_MARK not in calls:
        return ran(play, write_command(files), {"action": "write", "paths": paths,
                                                "skipped": skipped})
    if files and (failed := shell_failures(calls[WRITE_MARK], paths, "CANNOT WRITE")):
        return said(play, blocked_message("write", failed, calls[WRITE_MARK]),
                    {"action": "blocked", "step": "write", "failed": failed})
    return said(play, clipped(f"Wrote: {', '.join(paths) or '(nothing)'}"),
                {"action": "done", "wrote": paths, "skipped": skipped})
