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
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from specops_dag.builtin import CHECKOUT as PACKAGE_ROOT
from specops_dag.builtin import CODEX_NPM, HOOK_GUARD
from specops_dag.errors import ToolMissing
from specops_dag.process import ProcessResult, run_process

REPLAY_PROVIDER = "specops_replay"
REPLAY_MODEL = "gpt-5.5"  # a bundled slug: full model metadata and the apply_patch tool
NETWORK_LOOP = "waiting for network"
NETWORK_LOOP_LIMIT = 3
CODEX_PACKAGE = "@openai/codex"
INSTALL_DEADLINE_S = 900.0  # `npm ci` of the pinned CLI (a ~70 MB platform binary)
SECRET_SUFFIX = "_API_KEY"
DEFAULT_EXCLUDES = ("*KEY*", "*SECRET*", "*TOKEN*")  # codex's own, kept on explicitly
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
    """SPECOPS_CODEX_BIN, then node_modules/.bin/codex (harness root, this package), then PATH,
    then the pinned CLI `specops demo` installs into the per-user cache (`codex_cache`)."""
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
    cache = codex_cache()
    cached = cache / "node_modules" / ".bin" / "codex"
    if cached.is_file():
        return str(cached)
    if CODEX_NPM == PACKAGE_ROOT:  # a checkout: its own package.json pins the CLI
        raise ToolMissing(f"the codex CLI is not installed: run `npm ci` in {PACKAGE_ROOT} "
                          "(installs node_modules/.bin/codex), or set SPECOPS_CODEX_BIN, or put "
                          "`codex` on PATH")
    raise ToolMissing(f"the codex CLI is not installed: `specops demo` installs the pinned "
                      f"{CODEX_PACKAGE} {pinned_codex_version()} into {cache}, or run `mkdir -p "
                      f"{cache} && cp {CODEX_NPM}/package.json {CODEX_NPM}/package-lock.json "
                      f"{cache}/ && cd {cache} && npm ci`, or set SPECOPS_CODEX_BIN, or put "
                      "`codex` on PATH")


def pinned_codex_version() -> str:
    """The `@openai/codex` version the shipped package.json pins (its lock file installs it)."""
    manifest = json.loads((CODEX_NPM / "package.json").read_text(encoding="utf-8"))
    return manifest["dependencies"][CODEX_PACKAGE]


def codex_cache(env: dict[str, str] | os._Environ[str] | None = None) -> Path:
    """`${XDG_CACHE_HOME:-~/.cache}/specops-dag/codex-<pinned version>/`: where `specops demo`
    installs the pinned CLI (`node_modules/.bin/codex` inside) when none is found."""
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or ""
    if not os.path.isabs(base):  # the XDG spec: a relative value is ignored
        base = str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base) / "specops-dag" / f"codex-{pinned_codex_version()}"


def install_codex(echo: Callable[[str], None]) -> str:
    """Install the pinned codex CLI into `codex_cache()` with `npm ci` of the shipped lock file
    (integrity-checked by npm), staged beside it and renamed into place only once complete, so
    a killed or failed install is never found. Returns the installed binary."""
    cache = codex_cache()
    version = pinned_codex_version()
    if (cache / "node_modules" / ".bin" / "codex").is_file():  # another install just finished
        return str(cache / "node_modules" / ".bin" / "codex")
    npm = shutil.which("npm")
    if npm is None:
        raise ToolMissing(f"the codex CLI is not installed and `npm` is not on PATH to install "
                          f"the pinned {CODEX_PACKAGE} {version}: install Node.js 18+ with npm "
                          "(Debian: `apt-get install -y nodejs npm`) and run this again, or set "
                          f"SPECOPS_CODEX_BIN to a codex {version} binary")
    echo(f"codex CLI not found: installing the pinned {CODEX_PACKAGE} {version} into {cache} "
         "(npm ci, once per user)")
    if cache.exists():  # a folder without the binary is no install of ours: redo it
        shutil.rmtree(cache)
    cache.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{cache.name}.", dir=cache.parent))
    try:
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(CODEX_NPM / name, staging / name)
        result = run_process([npm, "ci", "--no-audit", "--no-fund"], cwd=staging,
                             deadline_s=INSTALL_DEADLINE_S)
        if not result.ok or not (staging / "node_modules" / ".bin" / "codex").is_file():
            why = (f"ran past its {INSTALL_DEADLINE_S:.0f} s deadline" if result.timed_out
                   else f"exited {result.exit_code} without node_modules/.bin/codex")
            tail = (result.stderr.strip() or result.stdout.strip())[-2000:]
            raise ToolMissing(f"`npm ci` of the pinned {CODEX_PACKAGE} {version} for {cache} "
                              f"{why} (nothing was installed): {tail or 'no output'}; check that "
                              "npm reaches its registry (`npm config get registry`), or set "
                              "SPECOPS_CODEX_BIN")
        try:
            staging.rename(cache)
        except OSError:  # another install finished first
            if not (cache / "node_modules" / ".bin" / "codex").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return str(cache / "node_modules" / ".bin" / "codex")


def ensure_codex(settings: AgentSettings, root: Path, echo: Callable[[str], None]) -> str:
    """`find_codex`, and when no codex is found at all, `install_codex` (a wrong
    SPECOPS_CODEX_BIN stays an error: it is the user's to fix)."""
    try:
        return find_codex(settings, root)
    except ToolMissing:
        if settings.codex_bin:
            raise
        return install_codex(echo)


def toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


# Codex's name of the `-c` layer in hook trust keys, and its snake_case event labels
# (codex-rs/hooks: `config_toml_source_path`, `hook_event_key_label`).
SESSION_FLAGS_SOURCE = "/<session-flags>/config.toml"
EVENT_LABELS = {"PreToolUse": "pre_tool_use", "SessionStart": "session_start",
                "UserPromptSubmit": "user_prompt_submit"}


def hook_trust_hash(event: str, command: str, matcher: str | None, timeout: int) -> str:
    """What codex 0.171 stores as a hook's `trusted_hash`: sha256 of the canonical JSON of its
    normalized definition (keys sorted, compact; `timeout` and `async` always present, the
    matcher only for events that take one). A hash that does not match makes codex skip the
    hook silently, so tests run every product hook end to end."""
    import hashlib

    handler = {"type": "command", "command": command, "timeout": max(1, timeout), "async": False}
    identity: dict[str, object] = {"event_name": EVENT_LABELS[event], "hooks": [handler]}
    if matcher is not None:
        identity["matcher"] = matcher
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(blob.encode("utf-8")).hexdigest()


def hook_overrides(python: str = sys.executable) -> list[str]:
    """`-c hooks.<Event>=[...]` for the product's own hooks, run by this Python environment in
    isolated mode from an absolute path (nothing in the session's cwd can shadow an import),
    and one `-c hooks.state={…}` that trusts exactly these definitions by hash. No trust bypass:
    a repository's own `.codex/hooks.json` stays pending review, as with plain codex."""
    out, state = [], []
    for event, arg, timeout in HOOKS:
        command = f"{shlex.quote(python)} -I {shlex.quote(str(HOOK_GUARD))} {arg}"
        matcher = ".*" if event == "PreToolUse" else None
        shown = f"matcher={toml_string(matcher)}, " if matcher is not None else ""
        out += ["-c", f"hooks.{event}=[{{{shown}hooks=[{{type=\"command\", "
                      f"command={toml_string(command)}, timeout={timeout}}}]}}]"]
        key = f"{SESSION_FLAGS_SOURCE}:{EVENT_LABELS[event]}:0:0"
        state.append(f"{toml_string(key)}={{enabled=true, trusted_hash="
                     f"{toml_string(hook_trust_hash(event, command, matcher, timeout))}}}")
    # One table: a second `-c hooks.state=` would replace the first, and a dotted key would be
    # split at the `.` of `config.toml`.
    return out + ["-c", "hooks.state={" + ", ".join(state) + "}"]


def run_model(settings: AgentSettings) -> str | None:
    """The model the product names for the sessions of these settings (`-m`): the configured
    one, the replay agent's bundled slug, or None (codex picks: see `expected_model`)."""
    return settings.model or (REPLAY_MODEL if settings.replay_url else None)


def expected_model(settings: AgentSettings,
                   env: dict[str, str] | os._Environ[str] | None = None) -> str | None:
    """The model a session of these settings will run, before codex reports it: `-m`, else the
    one codex's config names (`configured_model`), else None (codex's built-in default)."""
    return run_model(settings) or configured_model(settings, env)[0]


# Codex 0.171's config layers on Unix, lowest first (codex-rs/config loader): the system file,
# CODEX_HOME/config.toml, project `.codex/config.toml` files, the `-c` session flags, then the
# legacy managed file on top.
SYSTEM_CONFIG = Path("/etc/codex/config.toml")
MANAGED_CONFIG = Path("/etc/codex/managed_config.toml")


def configured_model(settings: AgentSettings,
                     env: dict[str, str] | os._Environ[str] | None = None
                     ) -> tuple[str | None, str]:
    """(model, provider id) codex resolves for the sessions of these settings from its config,
    read as codex does: the system file, the user's config.toml (not under
    `--ignore-user-config`, which replay sessions pass), the sessions' `-c` flags and the managed
    file, merged table by table; then the selected `profile`'s `model`/`model_provider` over the
    merged ones, `-m` over all, and provider `openai` when none is named. Project layers and
    cloud-managed config are not read: a model named only there, or codex's built-in default
    (model None), is known from codex's own report of the session (`session_report`)."""
    import tomllib

    env = os.environ if env is None else env
    files = [SYSTEM_CONFIG] + ([] if settings.replay_url else
                               [user_codex_home(settings, env) / "config.toml"])
    merged: dict = {}
    for path in files:
        try:
            with open(path, "rb") as fh:
                merge_toml(merged, tomllib.load(fh))
        except (OSError, tomllib.TOMLDecodeError):
            continue  # codex itself refuses a broken file, and says so
    flags = ([f"model_provider={REPLAY_PROVIDER}"] if settings.replay_url else [])
    for override in (*flags, *settings.config):
        merge_toml(merged, session_flag(override))
    try:
        with open(MANAGED_CONFIG, "rb") as fh:
            merge_toml(merged, tomllib.load(fh))
    except (OSError, tomllib.TOMLDecodeError):
        pass
    profiles = merged.get("profiles")
    chosen = profiles.get(merged.get("profile")) if isinstance(profiles, dict) else None
    chosen = chosen if isinstance(chosen, dict) else {}
    model = run_model(settings) or chosen.get("model") or merged.get("model")
    provider = chosen.get("model_provider") or merged.get("model_provider") or "openai"
    return (model if isinstance(model, str) else None,
            provider if isinstance(provider, str) else "openai")


def session_flag(override: str) -> dict:
    """One `-c key=value` as the table codex merges: the key split at each `.`, the value read
    as TOML, or kept as the raw text when it is not TOML (codex's rule)."""
    import tomllib

    key, _, raw = override.partition("=")
    try:
        value: object = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    for part in reversed(key.strip().split(".")):
        value = {part: value}
    return value if isinstance(value, dict) else {}


def merge_toml(base: dict, overlay: dict) -> None:
    """Codex's layer merge: tables merge key by key, any other value replaces."""
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge_toml(base[key], value)
        else:
            base[key] = value


def session_report(codex_home: Path, thread_id: str | None) -> tuple[str | None, str | None]:
    """(model, provider id) codex recorded for a session in its rollout file,
    `CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`: the last `turn_context`
    item's `model` and the `session_meta` item's `model_provider` (or, failing them, its
    `thread_settings_applied` event). `codex exec --json` says neither: its `thread.started`
    carries the thread id only. (None, None) when there is no such file."""
    if not thread_id:
        return None, None
    model = provider = applied_model = applied_provider = None
    for rollout in (codex_home / "sessions").glob(f"*/*/*/rollout-*-{thread_id}.jsonl"):
        for line in rollout.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                item = json.loads(line)
            except json.JSONDecodeError:
                continue
            payload = item.get("payload") if isinstance(item, dict) else None
            if not isinstance(payload, dict):
                continue
            if item.get("type") == "turn_context" and isinstance(payload.get("model"), str):
                model = payload["model"]
            elif item.get("type") == "session_meta" and isinstance(
                    payload.get("model_provider"), str):
                provider = payload["model_provider"]
            elif payload.get("type") == "thread_settings_applied":
                applied = payload.get("thread_settings") or {}
                applied_model = applied.get("model") or applied_model
                applied_provider = applied.get("model_provider_id") or applied_provider
    return model or applied_model, provider or applied_provider


WRITE_PROFILE = "specops_write"


def sandbox_args(sandbox: str, workdir: Path, add_dirs: tuple[Path, ...], network: bool,
                 tmpdir: str | None = None, read_only: tuple[Path, ...] = ()) -> list[str]:
    """The sandbox of one session. A writing session without network runs under a permission
    profile: `/` read; the worktree, the extra roots, `/tmp` (and `$TMPDIR`) writable; inside
    them the worktree's `.git` and `.codex` and the `read_only` folders (the delivery's own
    records: other nodes' handoffs, its state) read-only; the network routed through codex's
    managed proxy that allows no domain. `-s workspace-write` alone would deny bind, listen and
    connect on every socket (codex's Restricted seccomp mode), so MSBuild's node pipes and
    `dotnet test`'s testhost connection fail; the profile's proxy-routed mode lets local sockets
    and loopback work in an isolated network namespace, and nothing leaves it. Read-only
    sessions and sessions whose phase asks for network keep codex's `-s` modes."""
    if sandbox != "workspace-write" or network:
        argv = ["-s", sandbox]
        if network and sandbox == "workspace-write":
            argv += ["-c", "sandbox_workspace_write.network_access=true"]
        for extra in add_dirs:
            argv += ["--add-dir", str(extra)]
        return argv
    paths = {"/": "read", "/tmp": "write"}
    if tmpdir:
        paths[str(Path(tmpdir).resolve())] = "write"
    for root in (workdir, *add_dirs):
        paths[str(root)] = "write"
    paths[str(workdir / ".git")] = "read"
    paths[str(workdir / ".codex")] = "read"
    for folder in read_only:  # a more specific writable root inside it (the node folder) wins
        paths.setdefault(str(folder), "read")
    filesystem = ", ".join(f"{toml_string(k)}={toml_string(v)}" for k, v in paths.items())
    network_table = ("{enabled=true, domains={}, allow_local_binding=true, "
                     "dangerously_allow_all_unix_sockets=true}")
    return ["-c", f"permissions.{WRITE_PROFILE}={{filesystem={{{filesystem}}}, "
                  f"network={network_table}}}",
            "-c", f"default_permissions={toml_string(WRITE_PROFILE)}",
            "-c", "features.network_proxy=true"]


def codex_argv(codex_bin: str, *, sandbox: str, workdir: Path, last_message: Path,
               settings: AgentSettings, delivery: str, node: str, idle_timeout_s: int,
               add_dirs: tuple[Path, ...] = (), network: bool = False,
               tmpdir: str | None = None, read_only: tuple[Path, ...] = ()) -> list[str]:
    """The exact `codex exec` command line of one attempt; the prompt goes on stdin (`-`).
    The product sends AGENTS.md itself, so codex's own injection of it is off; the sandbox is
    `sandbox_args`'s."""
    argv = [codex_bin, "exec", "--json", *sandbox_args(sandbox, workdir, add_dirs, network,
                                                       tmpdir, read_only),
            "-C", str(workdir), "-o", str(last_message),
            "--skip-git-repo-check", *environment_policy(agent_excludes(settings)),
            "-c", "project_doc_max_bytes=0",
            "-c", "check_for_update_on_startup=false", *hook_overrides()]
    if settings.replay_url:
        from specops_dag.agent.replay import (  # the replay server's module only when replaying
            provider_base_url,
        )

        url = provider_base_url(settings.replay_url, delivery, node)
        # Codex's own stream idle timeout is set past ours so the product's watchdog decides.
        provider = (f'{{name="specops replay", base_url={toml_string(url)}, wire_api="responses", '
                    f"request_max_retries=0, stream_max_retries=0, "
                    f"stream_idle_timeout_ms={idle_timeout_s * 2000}}}")
        argv += ["--ignore-user-config", "-c", f"model_provider={REPLAY_PROVIDER}",
                 "-c", f"model_providers.{REPLAY_PROVIDER}={provider}"]
    model = run_model(settings)
    if model:
        argv += ["-m", model]
    for override in settings.config:
        argv += ["-c", override]
    return argv + ["-"]


@dataclass
class JsonlTail:
    """Reads the JSONL stdout as it grows; used live (network loop, running commands) and at the
    end (summary)."""

    path: Path
    offset: int = 0
    events: list[dict] = field(default_factory=list)
    network_errors: int = 0
    partial: bytes = b""
    # Commands started and not completed: item id -> (command, monotonic time first seen here).
    commands: dict[str, tuple[str, float]] = field(default_factory=dict)

    def read(self) -> None:
        if not self.path.exists():
            return
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            chunk = fh.read()
        self.offset += len(chunk)
        lines = (self.partial + chunk).split(b"\n")
        self.partial = lines.pop()
        seen = time.monotonic()
        for raw in lines:
            try:
                event = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if isinstance(event, dict):
                self.events.append(event)
                self.track(event, seen)
                if event.get("type") == "error" and NETWORK_LOOP in str(event.get("message")):
                    self.network_errors += 1

    def track(self, event: dict, seen: float) -> None:
        """Codex completes a command item when its process exits, also when the command outlived
        exec_command's `yield_time_ms` and runs on in a background exec session (the model's
        `write_stdin` polls show no item); what still runs when the turn ends codex kills without
        an `item.completed`, so the turn's end ends every command."""
        kind, item = event.get("type"), event.get("item")
        item = item if isinstance(item, dict) else {}
        if kind == "item.started" and item.get("type") == "command_execution":
            self.commands.setdefault(str(item.get("id")), (str(item.get("command") or ""), seen))
        elif kind == "item.completed":
            self.commands.pop(str(item.get("id")), None)
        elif kind in ("turn.completed", "turn.failed"):
            self.commands.clear()

    def command_age(self) -> float | None:
        """Seconds the oldest running command has run, None when none runs (`run_process` busy)."""
        self.read()
        if not self.commands:
            return None
        return time.monotonic() - min(seen for _, seen in self.commands.values())

    def oldest_command(self) -> str | None:
        return min(self.commands.values(), key=lambda c: c[1])[0] if self.commands else None

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
    overrun_command: str | None = None  # the command killed for passing `command_timeout_s`
    command_timeout_s: int = 1800
    infrastructure: str | None = None  # the provider failed, not the agent: worth a retry
    model: str | None = None  # the model codex reported for the session (`session_report`)
    provider: str | None = None  # the model provider's id codex reported for it

    @property
    def ok(self) -> bool:
        return (self.process.ok and self.turn_failed is None and self.environment_error is None
                and self.infrastructure is None)

    def failure(self, timeout_s: int, idle_timeout_s: int) -> str:
        p = self.process
        if p.timed_out:
            return f"codex passed the {timeout_s} s attempt deadline and was killed"
        if p.busy_timed_out:
            return (f"codex's command `{self.short(self.overrun_command or '?')}` ran longer than "
                    f"the {self.command_timeout_s} s command limit (command_timeout_s) and was "
                    "killed; run something shorter or raise the phase's "
                    "execution.command_timeout_s")
        if p.idle_timed_out:
            return (f"codex sent no JSONL event for {idle_timeout_s} s and was killed by the idle "
                    "watchdog")
        if self.infrastructure:
            return self.infrastructure
        if self.turn_failed:
            return f"codex turn failed (exit {p.exit_code}): {self.turn_failed}"
        return f"codex exited {p.exit_code}: {tail(p.stderr)}"

    @property
    def reason(self) -> str:
        """How this session ended, in the attempt reasons' terms (`AttemptReason`)."""
        p = self.process
        if self.environment_error:
            return "environment"
        if self.infrastructure:
            return "infrastructure"
        if p.timed_out or p.busy_timed_out:
            return "timeout"
        if p.idle_timed_out:
            return "idle"
        return "completed" if self.ok else "agent-error"

    @staticmethod
    def short(command: str, limit: int = 80) -> str:
        """`/bin/bash -lc 'dotnet test'` (how codex reports a command) -> `dotnet test`, on one
        line, at most `limit` characters."""
        try:
            parts = shlex.split(command)
        except ValueError:
            parts = []
        if len(parts) == 3 and parts[1] in ("-c", "-lc"):
            command = parts[2]
        text = " ".join(command.split())
        return text if len(text) <= limit else text[:limit - 1] + "…"


def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run_codex(argv: list[str], prompt: str, *, workdir: Path, env: dict[str, str],
              timeout_s: int, idle_timeout_s: int, stdout_path: Path,
              stderr_path: Path, command_timeout_s: int = 1800) -> CodexRun:
    """One attempt: prompt on stdin then closed; JSONL watched live; the tree killed on expiry.
    Codex emits nothing while one of its commands runs (a long `dotnet test`), so the idle
    watchdog waits while one does and each command gets `command_timeout_s` instead."""
    stream = JsonlTail(stdout_path)
    stdout_path.unlink(missing_ok=True)
    result = run_process(argv, cwd=workdir, env=env, stdin_data=prompt.encode("utf-8"),
                         deadline_s=timeout_s, idle_timeout_s=idle_timeout_s,
                         stdout_path=stdout_path, stderr_path=stderr_path, watch=stream.watch,
                         busy=stream.command_age, busy_timeout_s=command_timeout_s)
    overrun = stream.oldest_command() if result.busy_timed_out else None  # before the last read
    stream.read()
    run = summarize(result, stream.events, overrun_command=overrun,
                    command_timeout_s=command_timeout_s)
    home = Path(env.get("CODEX_HOME") or Path(env.get("HOME") or Path.home()) / ".codex")
    model, provider = session_report(home, run.thread_id)
    return replace(run, model=model, provider=provider)


def summarize(result: ProcessResult, events: list[dict], *, overrun_command: str | None = None,
              command_timeout_s: int = 1800) -> CodexRun:
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
    loop = sum(1 for e in events if e.get("type") == "error"
               and NETWORK_LOOP in str(e.get("message"))) >= NETWORK_LOOP_LIMIT
    infra = infrastructure_failure(result, failed, loop)
    return CodexRun(process=result, thread_id=thread_id, usage=usage,
                    last_message=messages[-1] if messages else "", turn_failed=failed,
                    environment_error=None if infra else environment_error(result, thread_id,
                                                                           failed),
                    events=len(events), overrun_command=overrun_command,
                    command_timeout_s=command_timeout_s, infrastructure=infra)


# What codex 0.171 says when the provider, not the request, failed (codex-rs: a 5xx is
# "We're currently experiencing high demand…" or "unexpected status 503 Service Unavailable: …",
# a 429 "exceeded retry limit, last status: 429 Too Many Requests", a cut stream "stream
# disconnected before completion: …").
INFRASTRUCTURE_SIGNS = ("high demand", "last status: 5", "unexpected status 5", "429",
                        "too many requests", "rate limit", "stream disconnected before completion",
                        "service unavailable", "bad gateway", "gateway timeout",
                        "internal server error", "connection reset", "error sending request")


def infrastructure_failure(result: ProcessResult, failed: str | None,
                           network_loop: bool) -> str | None:
    """The provider's failure, when that is what ended the session: the agent did nothing
    wrong, so it is retried without costing an agent call (issue 21)."""
    if network_loop and result.stopped:
        return (f"codex cannot reach its model provider (`Reconnecting... {NETWORK_LOOP}` "
                f"{NETWORK_LOOP_LIMIT} times); check the provider URL, the network or the "
                "replay server")
    if failed and any(sign in failed.lower() for sign in INFRASTRUCTURE_SIGNS):
        return f"the model provider failed (codex exit {result.exit_code}): {failed}"
    return None


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


def user_codex_home(settings: AgentSettings, env: dict[str, str] | os._Environ[str]) -> Path:
    """The codex home whose config.toml the user's own codex runs read."""
    return Path(settings.codex_home or env.get("CODEX_HOME") or Path.home() / ".codex")


def agent_excludes(settings: AgentSettings) -> list[str]:
    """The excludes of the agent sessions these settings start (see `excluded_patterns`)."""
    return excluded_patterns(user_codex_home(settings, os.environ))


def user_excludes(codex_home: Path) -> list[str]:
    """`shell_environment_policy.exclude` of the user's codex config (its patterns are kept:
    a `-c` override replaces the list it would extend). A config that cannot be read adds
    nothing here; codex itself reports it."""
    import tomllib

    try:
        with open(codex_home / "config.toml", "rb") as fh:
            config = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError):
        return []
    policy = config.get("shell_environment_policy")
    excludes = policy.get("exclude") if isinstance(policy, dict) else None
    return [p for p in excludes if isinstance(p, str)] if isinstance(excludes, list) else []


def excluded_patterns(codex_home: Path) -> list[str]:
    """Every pattern of variables kept from agent commands: codex's defaults, the user's own
    excludes and `*_API_KEY`, case-insensitive globs as codex reads them."""
    return list(dict.fromkeys([*DEFAULT_EXCLUDES, *user_excludes(codex_home),
                               f"*{SECRET_SUFFIX}"]))


def environment_policy(patterns: list[str]) -> list[str]:
    """The `-c` overrides that extend (never replace) the user's secret excludes."""
    listed = ", ".join(toml_string(p) for p in patterns)
    return ["-c", f"shell_environment_policy.exclude=[{listed}]",
            "-c", "shell_environment_policy.ignore_default_excludes=false"]


def secret_values(env: dict[str, str], patterns: list[str] | None = None) -> list[str]:
    """Values of the variables the patterns exclude: redacted from everything saved."""
    import fnmatch

    rules = [p.upper() for p in (patterns or [f"*{SECRET_SUFFIX}"])]
    found = {v for k, v in env.items() if len(v) >= 4
             and any(fnmatch.fnmatchcase(k.upper(), rule) for rule in rules)}
    return sorted(found, key=len, reverse=True)  # a longer secret first: no partial redaction
