"""Drives the real Codex CLI (`codex exec --json`) for one attempt (DESIGN §7, reference
codex-exec.md): locates the binary, builds argv, feeds the prompt on stdin, watches the JSONL
stream live and classifies the outcome. Verdicts are data; only a missing binary raises.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ToolMissing
from .process import ProcessResult, run_process

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
REPLAY_PROVIDER = "specops_replay"
REPLAY_MODEL = "gpt-5.5"  # a bundled slug: full model metadata and the apply_patch tool
NETWORK_LOOP = "waiting for network"
NETWORK_LOOP_LIMIT = 3
SECRET_SUFFIX = "_API_KEY"
# (codex event, `specops hook` event, timeout s): safety on every tool call, state on prompts.
HOOKS = (("PreToolUse", "pre-tool-use", 30), ("SessionStart", "session-start", 5),
         ("UserPromptSubmit", "user-prompt-submit", 5))


@dataclass(frozen=True)
class AgentSettings:
    """How to run codex; resolved once at the edges (env, CLI options, Dagster resource)."""

    codex_bin: str | None = None
    replay_url: str | None = None
    model: str | None = None
    config: tuple[str, ...] = ()
    codex_home: str | None = None

    @classmethod
    def from_env(cls, env: dict[str, str] | os._Environ[str] | None = None) -> AgentSettings:
        env = os.environ if env is None else env
        extra = tuple(c for c in (env.get("SPECOPS_CODEX_CONFIG") or "").split("\n") if c.strip())
        return cls(codex_bin=env.get("SPECOPS_CODEX_BIN") or None,
                   replay_url=env.get("SPECOPS_REPLAY_URL") or None,
                   model=env.get("SPECOPS_CODEX_MODEL") or None, config=extra,
                   codex_home=env.get("SPECOPS_CODEX_HOME") or None)


def find_codex(settings: AgentSettings, root: Path) -> str:
    """SPECOPS_CODEX_BIN, then node_modules/.bin/codex (harness root, this package), then PATH."""
    if settings.codex_bin:
        if Path(settings.codex_bin).is_file() and os.access(settings.codex_bin, os.X_OK):
            return settings.codex_bin
        raise ToolMissing(f"SPECOPS_CODEX_BIN={settings.codex_bin} is not an executable file; "
                          "fix it or unset it")
    for base in (root, PACKAGE_ROOT):
        candidate = base / "node_modules" / ".bin" / "codex"
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("codex")
    if found:
        return found
    raise ToolMissing(f"the codex CLI is not installed: run `npm ci` in {PACKAGE_ROOT} (installs "
                      "node_modules/.bin/codex), or set SPECOPS_CODEX_BIN, or put `codex` on PATH")


def toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def hook_overrides(python: str = sys.executable) -> list[str]:
    """`-c hooks.<Event>=[...]` for the product's own hooks, run by this Python environment.
    The executor vets these commands itself, hence `--dangerously-bypass-hook-trust`."""
    out = []
    for event, arg, timeout in HOOKS:
        command = toml_string(f"{shlex.quote(python)} -m specops_dag.hook {arg}")
        matcher = 'matcher=".*", ' if event == "PreToolUse" else ""
        out += ["-c", f"hooks.{event}=[{{{matcher}hooks=[{{type=\"command\", "
                      f"command={command}, timeout={timeout}}}]}}]"]
    return out + ["--dangerously-bypass-hook-trust"]


def codex_argv(codex_bin: str, *, sandbox: str, workdir: Path, last_message: Path,
               settings: AgentSettings, delivery: str, node: str, idle_timeout_s: int,
               add_dirs: tuple[Path, ...] = ()) -> list[str]:
    """The exact `codex exec` command line of one attempt; the prompt goes on stdin (`-`)."""
    argv = [codex_bin, "exec", "--json", "-s", sandbox, "-C", str(workdir), "-o", str(last_message),
            "--skip-git-repo-check",
            "-c", f'shell_environment_policy.exclude=["*{SECRET_SUFFIX}"]',
            "-c", "check_for_update_on_startup=false", *hook_overrides()]
    for extra in add_dirs:
        argv += ["--add-dir", str(extra)]
    if settings.replay_url:
        from .replay import provider_base_url  # the replay server's module only when replaying

        url = provider_base_url(settings.replay_url, delivery, node)
        # Codex's own stream idle timeout is set past ours so the product's watchdog decides.
        provider = (f'{{name="specops replay", base_url={toml_string(url)}, wire_api="responses", '
                    f"request_max_retries=0, stream_max_retries=0, "
                    f"stream_idle_timeout_ms={idle_timeout_s * 2000}}}")
        argv += ["--ignore-user-config", "-c", f"model_provider={REPLAY_PROVIDER}",
                 "-c", f"model_providers.{REPLAY_PROVIDER}={provider}"]
    model = settings.model or (REPLAY_MODEL if settings.replay_url else None)
    if model:
        argv += ["-m", model]
    for override in settings.config:
        argv += ["-c", override]
    return argv + ["-"]


@dataclass
class JsonlTail:
    """Reads the JSONL stdout as it grows; used live (network loop) and at the end (summary)."""

    path: Path
    offset: int = 0
    events: list[dict] = field(default_factory=list)
    network_errors: int = 0
    partial: bytes = b""

    def read(self) -> None:
        if not self.path.exists():
            return
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            chunk = fh.read()
        self.offset += len(chunk)
        lines = (self.partial + chunk).split(b"\n")
        self.partial = lines.pop()
        for raw in lines:
            try:
                event = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if isinstance(event, dict):
                self.events.append(event)
                if event.get("type") == "error" and NETWORK_LOOP in str(event.get("message")):
                    self.network_errors += 1

    def watch(self) -> str | None:
        self.read()
        if self.network_errors >= NETWORK_LOOP_LIMIT:
            return (f"environment error: codex cannot reach its model provider (`Reconnecting... "
                    f"{NETWORK_LOOP}` {self.network_errors} times); check the provider URL, the "
                    "network or the replay server")
        return None


@dataclass(frozen=True)
class CodexRun:
    """What one `codex exec` did. `environment_error` means: stop, do not retry."""

    process: ProcessResult
    thread_id: str | None
    usage: dict[str, int]
    last_message: str
    turn_failed: str | None
    environment_error: str | None
    events: int

    @property
    def ok(self) -> bool:
        return self.process.ok and self.turn_failed is None and self.environment_error is None

    def failure(self, timeout_s: int, idle_timeout_s: int) -> str:
        p = self.process
        if p.timed_out:
            return f"codex passed the {timeout_s} s attempt deadline and was killed"
        if p.idle_timed_out:
            return (f"codex sent no JSONL event for {idle_timeout_s} s and was killed by the idle "
                    "watchdog")
        if self.turn_failed:
            return f"codex turn failed (exit {p.exit_code}): {self.turn_failed}"
        return f"codex exited {p.exit_code}: {tail(p.stderr)}"


def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run_codex(argv: list[str], prompt: str, *, workdir: Path, env: dict[str, str],
              timeout_s: int, idle_timeout_s: int, stdout_path: Path,
              stderr_path: Path) -> CodexRun:
    """One attempt: prompt on stdin then closed; JSONL watched live; the tree killed on expiry."""
    stream = JsonlTail(stdout_path)
    stdout_path.unlink(missing_ok=True)
    result = run_process(argv, cwd=workdir, env=env, stdin_data=prompt.encode("utf-8"),
                         deadline_s=timeout_s, idle_timeout_s=idle_timeout_s,
                         stdout_path=stdout_path, stderr_path=stderr_path, watch=stream.watch)
    stream.read()
    return summarize(result, stream.events)


def summarize(result: ProcessResult, events: list[dict]) -> CodexRun:
    thread_id = next((e.get("thread_id") for e in events if e.get("type") == "thread.started"),
                     None)
    usage: dict[str, int] = {}
    messages, failed = [], None
    for e in events:
        kind = e.get("type")
        if kind == "turn.completed" and isinstance(e.get("usage"), dict):
            usage = {k: int(v) for k, v in e["usage"].items() if isinstance(v, int)}
        elif kind == "turn.failed":
            failed = str((e.get("error") or {}).get("message") or "turn failed")
        elif kind == "item.completed" and (e.get("item") or {}).get("type") == "agent_message":
            messages.append(str(e["item"].get("text") or ""))
    return CodexRun(process=result, thread_id=thread_id, usage=usage,
                    last_message=messages[-1] if messages else "", turn_failed=failed,
                    environment_error=environment_error(result, thread_id, failed),
                    events=len(events))


def environment_error(result: ProcessResult, thread_id: str | None,
                      failed: str | None) -> str | None:
    """Failures no retry can fix (seed 001 §6): CLI options, config, auth, network loop."""
    if result.stopped:
        return result.stopped
    if result.exit_code == 2:
        return f"codex rejected its command line (exit 2): {tail(result.stderr, 5)}"
    if result.exit_code not in (0, None) and thread_id is None:
        return (f"codex failed before starting a session (exit {result.exit_code}; bad option, "
                f"config or provider): {tail(result.stderr, 5)}")
    if failed and any(s in failed for s in ("401", "Unauthorized", "environment variable")):
        return f"codex cannot authenticate with its model provider: {failed}"
    return None


def secret_values(env: dict[str, str]) -> list[str]:
    return [v for k, v in env.items() if k.endswith(SECRET_SUFFIX) and len(v) >= 4]


def redact(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text
