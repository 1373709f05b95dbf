"""What a shell command would run, as far as the PreToolUse hook cares (seed 001 §7): a walk
over the commands `shell` reads that denies destructive deletes, force pushes, hard resets and
SQL-destroying statements — also behind `bash -c`, `eval`, pipes into shells and scripts
written earlier in the same command — and records the files the command writes. Standard
library only: it runs on every tool call."""

from __future__ import annotations

import os
import posixpath
import re

from specops_dag.hooks.shell import OUTPUT, Cmd, parse
from specops_dag.hooks.tdd import patch_changes, written_by

MAX_COMMAND = 200_000
MAX_DEPTH = 12
MAX_SCRIPT = 256 * 1024


SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "fish"}
SHELL_LIKE = {"su", "runuser", "script", "pwsh", "powershell"}  # run the argument of -c/-Command
WRAPPERS = {  # commands that run their arguments → their short options taking a separate value
    "sudo": "ugCDhpRrtTU", "doas": "uC", "env": "uC", "nohup": "", "time": "", "nice": "n",
    "ionice": "cnp", "timeout": "sk", "command": "", "builtin": "", "exec": "a", "stdbuf": "ioe",
    "setsid": "", "busybox": "", "xargs": "InPdLsaE", "unbuffer": "", "chronic": ""}
KEYWORDS = {"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until",
            "esac"}
HEADERS = {"for", "case", "select", "function", "in"}
SQL_CLIENTS = {"psql", "mysql", "mariadb", "sqlite3", "sqlcmd", "osql", "isql", "duckdb",
               "clickhouse-client", "cockroach", "mssql-cli", "pgcli", "mycli", "litecli", "usql",
               "sqlplus"}
CONTAINERS = {"docker", "podman", "nerdctl", "kubectl", "oc"}  # `docker exec db psql …`
INTERPRETER = re.compile(r"(?:python|pypy)[\d.]*|node(?:js)?|deno|bun|perl|ruby|php")
NAME_TESTS = {"-name", "-iname", "-path", "-ipath", "-wholename", "-regex", "-iregex"}
SAFE_DEVICES = re.compile(r"/dev/(?:null|zero|full|u?random|stdout|stderr|tty|fd/.*)")
GIT_VALUE_OPTIONS = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path",
                     "--config-env", "--super-prefix"}
EVERYTHING = {".", "./", "*", ":/", ":/*", ":(top)", ":(top).", "/"}
GLOB = re.compile(r"[*?\[]")
CATCH_ALL = re.compile(r"[.*?]*[*?][.*?]*")
ASSIGN = re.compile(r"[A-Za-z_]\w*(?:\[[^\]]*\])?\+?=")
VAR = re.compile(r"\$\{([A-Za-z_]\w*)(?:(:?[-=+?])([^}]*))?\}|\$([A-Za-z_]\w*|[0-9@*#?$!-])")
PWD = ("$(pwd)", "`pwd`", "$(pwd -P)", "$(pwd -L)")
TOPLEVEL = ("$(git rev-parse --show-toplevel)", "`git rev-parse --show-toplevel`")
SHEBANG = re.compile(r"#![^\n]*\b(?:ba|z|da|k|a)?sh\b")
SQL_DESTROY = re.compile(r"\b(?:drop\s+(?:temporary\s+)?(?:table|database|schema)\b(?:\s+if\s+"
                         r"exists)?\s*[^\s;]*|truncate\s+(?:table\s+)?(?!-)[^\s;]+)", re.I)
SQL_DELETE = re.compile(r"\bdelete\s+from\s+[^\s;]+([^;'\"]*)", re.I)
WHERE = re.compile(r"\bwhere\b", re.I)
CALL = re.compile(r"\b(system|popen|run|call|check_call|check_output|Popen|getoutput|exec|"
                  r"execSync|spawnSync|spawn|shell_exec|passthru|rmtree|rmSync|rmdirSync|"
                  r"remove_dir_all|rimraf)\s*\(\s*(\[[^\]]*\]|(['\"]).*?(?<!\\)\3)", re.S)
LITERAL = re.compile(r"(['\"])((?:\\.|(?!\1).)*)\1", re.S)
SQLITE_READ = re.compile(r"\.read\s+(\S+)")
DELETE_FUNCS = {"rmtree", "rmSync", "rmdirSync", "remove_dir_all", "rimraf"}
# How each SQL client takes its statements without a terminal: a flag, or SQL as a positional
# argument after the database (the `*_POSITIONAL` clients).
SQL_INPUT_FLAGS = {"-c", "--command", "-e", "--execute", "-f", "--file", "-i", "--input-file",
                   "-q", "-Q", "--query", "-cmd", "-E"}
SQL_POSITIONAL = {"sqlite3", "duckdb", "litecli"}
COMPUTED = re.compile(r"\$\(|`|<\(")
INTERACTIVE = ("starts an interactive {what}; what is typed into it later never reaches this "
               "hook, so it is denied: run each command directly (e.g. `bash -c '…'`, "
               "`python3 script.py`, `psql -c '…'`)")


def xargs_replace(arg: str, value: str) -> str | None:
    """The replace string an xargs option sets (`-I R`, `-IR`, `-i[R]`, `--replace[=R]`)."""
    if arg == "-I":
        return value or None
    if arg.startswith("-I"):
        return arg[2:]
    if arg.startswith("--replace"):
        return arg.partition("=")[2] or "{}"
    if arg.startswith("-i"):
        return arg[2:] or "{}"
    return None


def command_name(word: str) -> str:
    """`/usr/bin/git.exe` → `git`: absolute paths, quoting and `.exe` do not hide a command."""
    name = word.replace("\\", "/").rsplit("/", 1)[-1].lower()
    return name[:-4] if name.endswith(".exe") else name


def shown(words: list[str]) -> str:
    text = " ".join(words)
    return text if len(text) <= 160 else text[:157] + "..."


def short(arg: str) -> bool:
    return arg.startswith("-") and not arg.startswith("--") and len(arg) > 1


def normalize(path: str) -> str:
    path = posixpath.normpath(path)
    return "/" + path.lstrip("/") if path.startswith("//") else path


def sql_reason(text: str) -> str | None:
    if m := SQL_DESTROY.search(text):
        return (f"`{' '.join(m.group().split())[:80]}` destroys database objects or all their "
                "rows; change the schema or data through a reviewed migration instead")
    for m in SQL_DELETE.finditer(text):
        if not WHERE.search(m.group(1)):
            return (f"`{' '.join(m.group().split())[:80]}` deletes every row (DELETE without "
                    "WHERE); add a WHERE clause naming the rows to delete")
    return None


def inspect(command: str, repo: str, env: dict[str, str], cwd: str | None = None) -> Walk:
    """Walk a shell command run in `cwd` (default: the root of `repo`); `walk.reason` names the
    first dangerous thing found."""
    walk = Walk(repo, env, cwd)
    if len(command) > MAX_COMMAND:
        walk.reason = (f"the command is {len(command):,} characters long, more than the "
                       f"{MAX_COMMAND:,} the hook checks; split it, or write file contents "
                       "with apply_patch")
    else:
        walk.reason = walk.text(command)
    return walk


class Walk:
    """One walk over a command: the virtual cwd (after `cd`), shell variables, the files the
    command has written so far (path → text, for scripts it runs later) and every path written."""

    def __init__(self, repo: str, env: dict[str, str], cwd: str | None = None) -> None:
        self.env = {**env, "HOME": env.get("HOME") or os.path.expanduser("~")}
        self.repo = normalize(repo)
        self.cwd = normalize(cwd or repo)  # where the tool call runs: the repo or a folder in it
        self.vars: dict[str, str] = {}
        self.loops: dict[str, list[str]] = {}  # `for` variable → the paths it takes
        self.files: dict[str, str] = {}
        self.writes: list[str] = []
        self.deleted: set[str] = set()
        self.reason: str | None = None
        self.depth = 0
        named = [("/", "the filesystem root /"), (self.env["HOME"], "the home folder"),
                 (self.repo, "the repository"), (env.get("SPECOPS_ROOT"), "the harness root"),
                 (env.get("SPECOPS_TARGET"), "the target repository")]
        self.guarded = [(normalize(p), what) for p, what in named if p and p.startswith("/")]
        self.state = normalize(f"{env.get('SPECOPS_ROOT') or self.repo}/phases")

    # -- reading the command -------------------------------------------------------------------

    def text(self, text: str) -> str | None:
        if self.depth > MAX_DEPTH:
            return (f"the command nests shells, eval or substitutions more than {MAX_DEPTH} "
                    "levels deep and cannot be checked; run the commands directly")
        cmds, subs = parse(text)
        for body in subs:
            if reason := self.nested(body):
                return reason
        for cmd in cmds:
            if reason := self.command(cmd):
                return reason
        return None

    def nested(self, text: str | None) -> str | None:
        """Check text that a shell will run (`bash -c`, eval, a script, a substitution)."""
        if not text:
            return None
        saved = (self.cwd, dict(self.vars))
        self.depth += 1
        try:
            return self.text(text)
        finally:
            self.depth -= 1
            self.cwd, self.vars = saved

    def command(self, cmd: Cmd) -> str | None:
        if len(cmd.words) > 2 and cmd.words[0] == "for" and cmd.words[2] == "in":
            self.loops[cmd.words[1]] = [self.path(w) or "" for w in cmd.words[3:]] or [""]
        words, xargs = self.unwrap(cmd.words)
        if not words and all(ASSIGN.match(w) for w in cmd.words):
            self.assign(cmd.words)
        if xargs and self.interactive(cmd):
            return (f"`{shown(cmd.words)}` builds commands from what is typed into it later, "
                    "which never reaches this hook; pipe it a known input or run the commands "
                    "directly")
        if xargs:
            words = self.xargs(words, cmd, xargs)
        if words:
            words, why = self.program(words)
            if why:
                return why
        self.record_writes(cmd, words)
        return self.check(words, cmd) if words else None

    def xargs(self, words: list[str], cmd: Cmd, replace: bool | str) -> list[str]:
        """The command xargs builds: its input appended, or put where the replace string is
        (`-I R`). An input the hook cannot see stays a placeholder, so a program taken from it
        is computed at run time."""
        piped = self.stdin_text(cmd)
        item = piped.strip() if piped and piped.strip() else "$(xargs input)"
        if isinstance(replace, str):
            return [w.replace(replace, item) for w in words]
        return [*words, *(piped or "").split()]

    def program(self, words: list[str]) -> tuple[list[str], str | None]:
        """The program word as the shell will run it; a word computed at run time (a command
        substitution, an unknown variable) cannot be checked, so it is the reason to deny."""
        word = words[0]
        why = (f"`{shown(words)}`: the program is computed at run time, so the hook cannot check "
               "what runs; write the command literally")
        if COMPUTED.search(word):
            return words, why
        if "$" in word:
            names = [m.group(1) or m.group(4) for m in VAR.finditer(word)]
            if not names or any(n != "PWD" and n not in self.vars and n not in self.env
                                for n in names):
                return words, why
            word = VAR.sub(self.var, word)
            if not word.strip() or "$" in word:
                return words, why
        return [word, *words[1:]], None

    def interactive(self, cmd: Cmd) -> bool:
        """Nothing feeds the command's stdin (no heredoc, `<` or pipe): it reads the terminal."""
        return (cmd.stdin is None and cmd.pipe_from is None
                and not any(op == "<" for op, _ in cmd.redirects))

    def unwrap(self, words: list[str]) -> tuple[list[str], bool | str]:
        """Strip assignments, keywords and wrappers (sudo, env, timeout, xargs …), however many;
        also says whether xargs runs the rest (its replace string, if it has one)."""
        xargs: bool | str = False
        k = 0
        while k < len(words):
            while k < len(words) and ASSIGN.match(words[k]):
                k += 1
            name = command_name(words[k]) if k < len(words) else ""
            if name in HEADERS:
                return [], xargs
            if name in KEYWORDS:
                k += 1
                continue
            if name not in WRAPPERS:
                break
            xargs = xargs or name == "xargs"
            i = k + 1
            while i < len(words) and words[i].startswith("-") and words[i] != "-":
                arg, i = words[i], i + 1
                if arg == "--":
                    break
                if name == "xargs":
                    xargs = xargs_replace(arg, words[i] if i < len(words) else "") or xargs
                if name == "command" and arg in ("-v", "-V"):
                    return [], xargs
                if name == "env" and arg == "-S" and i < len(words):
                    words, i = [*words[:i - 1], *words[i].split(), *words[i + 1:]], i - 1
                elif len(arg) == 2 and arg[1] in WRAPPERS[name]:
                    i += 1
            k = i + (name == "timeout")
        return words[k:], xargs

    def check(self, words: list[str], cmd: Cmd) -> str | None:
        name, args = command_name(words[0]), words[1:]
        if name in ("cd", "pushd"):
            target = next((a for a in args if not a.startswith("-")), "~")
            self.cwd = self.path(target) or self.cwd
        elif name in ("export", "declare", "local", "readonly", "typeset"):
            self.assign(args)
        elif name == "alias":
            return next(filter(None, (self.nested(a.partition("=")[2]) for a in args)), None)
        elif name in ("eval", "trap"):
            return self.nested(" ".join(args) if name == "eval" else args[0] if args else None)
        elif name in ("source", "."):
            return self.nested(self.script(args[0], True)) if args else None
        elif name in SHELLS or name in SHELL_LIKE:
            return self.shell(words, cmd)
        elif name in SQL_CLIENTS or name in CONTAINERS and not SQL_CLIENTS.isdisjoint(args):
            return self.sql_client(words, cmd)
        elif INTERPRETER.fullmatch(name):
            return self.interpreter(words, cmd)
        elif rule := {"rm": self.rm, "git": self.git, "find": self.find, "dd": self.dd,
                      "dotnet": self.dotnet, "dotnet-ef": self.dotnet}.get(name):
            return rule(words)
        elif name.startswith("mkfs"):
            return f"`{shown(words)}` formats a disk; never run it here"
        elif "/" in words[0]:
            return self.nested(self.script(words[0]))
        return None

    def shell(self, words: list[str], cmd: Cmd) -> str | None:
        i, inline, from_stdin = 1, False, False
        if command_name(words[0]) in SHELLS:
            while i < len(words) and words[i][:1] in "-+" and words[i] not in ("-", "--"):
                arg, i = words[i], i + 1
                if arg in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
                    i += 1
                elif not arg.startswith("--"):
                    inline, from_stdin = inline or "c" in arg, from_stdin or "s" in arg
            i += i < len(words) and words[i] in ("-", "--")
        else:
            flags = [j for j, a in enumerate(words) if a.lower() in ("-c", "--command", "-command")]
            files = [a for a in words if a.lower() in ("-f", "-file", "--file")]
            if not flags:
                return None if files or command_name(words[0]) in ("su", "runuser", "script") \
                    or not self.interactive(cmd) else (f"`{shown(words)}` "
                                                      + INTERACTIVE.format(what="shell"))
            inline, i = True, flags[0] + 1
        rest = words[i:]
        if inline:
            return self.nested(rest[0]) if rest else None
        if "-i" in words[1:i] or "--interactive" in words[1:i]:
            return f"`{shown(words)}` " + INTERACTIVE.format(what="shell")
        if rest and not from_stdin:
            return self.nested(self.script(rest[0], True))
        if self.interactive(cmd):
            return f"`{shown(words)}` " + INTERACTIVE.format(what="shell")
        piped = self.stdin_text(cmd)
        if piped is None:
            return (f"`{shown(words)}` runs shell commands the hook cannot see (piped from "
                    "another command); write the commands literally")
        return self.nested(piped)

    def interpreter(self, words: list[str], cmd: Cmd) -> str | None:
        for i, arg in enumerate(words[1:-1], 1):
            if arg in ("--eval", "--print") or short(arg) and arg[-1] in "ceEpr" and len(arg) < 5:
                return self.code(words[i + 1])
        if any(a in ("-i", "--interactive") for a in words[1:]):
            return f"`{shown(words)}` " + INTERACTIVE.format(what="interpreter")
        script = next((a for a in words[1:] if not a.startswith("-")), None)
        if script is None and self.interactive(cmd) and not any(
                a in ("--version", "-V", "--help", "-h") or a.startswith("-m")
                for a in words[1:]):
            return f"`{shown(words)}` " + INTERACTIVE.format(what="interpreter")
        if script is None:
            return self.code(self.stdin_text(cmd) or "")
        path = self.path(script)
        return self.code(self.files[path]) if path in self.files else None

    def code(self, text: str) -> str | None:
        """Inline interpreter code: SQL in it, and the shell commands or deletes it calls."""
        if reason := sql_reason(text):
            return reason
        for m in CALL.finditer(text):
            values = [v for _, v in LITERAL.findall(m.group(2))]
            if not values:
                continue
            if m.group(1) in DELETE_FUNCS:
                reason = self.rm(["rm", "-r", values[0]])
            elif m.group(2).startswith("["):
                reason = self.nested(" ".join("'" + v.replace("'", "'\\''") + "'" for v in values))
            else:
                reason = self.nested(values[0])
            if reason:
                return reason
        return None

    def sql_client(self, words: list[str], cmd: Cmd) -> str | None:
        name = command_name(words[0])
        positional = [a for a in words[1:] if not a.startswith("-")]
        if (name in SQL_CLIENTS and self.interactive(cmd)
                and SQL_INPUT_FLAGS.isdisjoint(a.split("=")[0] for a in words[1:])
                and not (name in SQL_POSITIONAL and len(positional) >= 2)
                and not any(a in ("--version", "-V", "--help", "-?") for a in words[1:])):
            return f"`{shown(words)}` " + INTERACTIVE.format(what="database shell")
        texts = [*words[1:], self.stdin_text(cmd) or ""]
        for i, arg in enumerate(words):
            value = words[i + 1] if i + 1 < len(words) else ""
            if arg.startswith("--file="):
                value, arg = arg[7:], "-f"
            if arg in ("-f", "--file", "-i", "--input-file"):
                texts.append(self.script(value, True) or "")
            texts += [self.script(f, True) or "" for f in SQLITE_READ.findall(arg)]
        return next(filter(None, map(sql_reason, texts)), None)

    # -- the rules -----------------------------------------------------------------------------

    def rm(self, words: list[str]) -> str | None:
        recursive, targets, options = False, [], True
        for arg in words[1:]:
            if options and arg == "--":
                options = False
            elif options and arg.startswith("--"):
                recursive |= arg == "--recursive"
            elif options and short(arg):
                recursive |= "r" in arg or "R" in arg
            else:
                targets.append(arg)
        for path in (p for target in targets for p in self.paths(target)):
            what = self.glob_label(path) if GLOB.search(path) else recursive and self.label(path)
            if what:
                return (f"`{shown(words)}` deletes {what}; delete only specific paths inside the "
                        "repository, e.g. `rm -rf bin obj`")
        return None

    def find(self, words: list[str]) -> str | None:
        args = words[1:]
        k = next((i for i, a in enumerate(args) if a[:1] in "-(!"), len(args))
        starts, expr = args[:k] or ["."], args[k:]
        deletes = "-delete" in expr
        for i, arg in enumerate(expr):
            if arg in ("-exec", "-execdir", "-ok", "-okdir"):
                end = next((j for j in range(i + 1, len(expr)) if expr[j] in (";", "+")),
                           len(expr))
                inner = expr[i + 1:end]
                deletes |= bool(inner) and command_name(inner[0]) == "rm"
                if inner and (reason := self.check(inner, Cmd())):
                    return reason
        filtered = any(a in NAME_TESTS and not CATCH_ALL.fullmatch(b)
                       for a, b in zip(expr, expr[1:], strict=False))
        for path in (p for s in starts for p in self.paths(s)) if deletes and not filtered else []:
            if what := self.label(path):
                return (f"`{shown(words)}` deletes everything in {what}; add a -name or -path "
                        "test that names what to delete")
        return None

    def git(self, words: list[str]) -> str | None:
        i = 1
        while i < len(words) and words[i].startswith("-"):
            i += 2 if words[i] in GIT_VALUE_OPTIONS else 1
        sub, args = (words[i], words[i + 1:]) if i < len(words) else ("", [])
        flags = "".join(a[1:] for a in args if short(a))
        paths = args[args.index("--") + 1:] if "--" in args else [
            a for a in args if not a.startswith("-")]
        everything = next((p for p in paths if self.everything(p)), None)
        why = None
        if sub == "push":
            why = self.push(args)
        elif sub == "reset" and "--hard" in args:
            why = ("discards uncommitted changes; keep them (`git stash`, or `git reset --soft` / "
                   "`--mixed`)")
        elif sub == "clean" and ("f" in flags or "--force" in args) and not (
                "n" in flags or "--dry-run" in args or "X" in flags and "x" not in flags):
            why = ("deletes untracked files, which may be new work; delete specific build "
                   "outputs instead (e.g. `rm -rf bin obj`) or preview with `git clean -n`")
        elif sub in ("checkout", "switch") and ("f" in flags or {"--force", "--discard-changes"}
                                                & set(args)):
            why = "discards uncommitted changes (a forced checkout); commit or stash them first"
        elif sub in ("checkout", "restore") and everything and (sub == "checkout" or "W" in flags
                or "--worktree" in args or not ("S" in flags or "--staged" in args)):
            why = (f"discards every uncommitted change under `{everything}`; restore specific "
                   "files by path instead")
        elif sub == "rm" and everything and ("r" in flags or "--recursive" in args) \
                and "--cached" not in args:
            why = ("removes every tracked file; remove specific paths, or add --cached to only "
                   "untrack them")
        return f"`{shown(words)}` {why}" if why else None

    def push(self, args: list[str]) -> str | None:
        for arg in args:
            force = arg in ("--force", "--mirror", "--force-if-includes") or arg.startswith(
                "--force-with-lease") or short(arg) and "f" in arg
            if force or not arg.startswith("-") and arg.startswith("+"):
                return (f"force-pushes (`{arg}`), which rewrites remote history; push new "
                        "commits without force, e.g. `git push origin feat-x`")
            if arg in ("--delete", "--prune") or short(arg) and "d" in arg or arg.startswith(
                    ":") and len(arg) > 1:
                return (f"deletes remote branches (`{arg}`); leave the remote to the delivery's "
                        "push step")
        return None

    def dd(self, words: list[str]) -> str | None:
        for arg in words[1:]:
            if arg.startswith("of=/dev/") and not SAFE_DEVICES.fullmatch(arg[3:]):
                return f"`{shown(words)}` overwrites the disk device {arg[3:]}; never run it here"
        return None

    def dotnet(self, words: list[str]) -> str | None:
        if words[1:2] == ["fsi"] and not any(a.endswith((".fsx", ".fs")) for a in words[2:]):
            return f"`{shown(words)}` " + INTERACTIVE.format(what="F# interpreter")
        ef = words[1:] if command_name(words[0]) == "dotnet-ef" else words[2:] if words[1:2] == [
            "ef"] else []
        if "drop" in ef and "database" in ef[:ef.index("drop")]:
            return (f"`{shown(words)}` drops the database; change the schema with a migration "
                    "instead")
        return None

    # -- paths -----------------------------------------------------------------------------------

    def label(self, path: str) -> str | None:
        """What deleting `path` recursively would destroy, if it is guarded."""
        if ".git" in path.split("/"):
            return "the git metadata (.git)"
        for base, what in self.guarded:
            if path == base:
                return what
            if base.startswith(path.rstrip("/") + "/"):
                return f"a parent folder of {what}"
        if path == self.state or posixpath.dirname(path) == self.state:
            return "the delivery state (phases/)"
        return f"the top-level folder {path}" if path.count("/") == 1 and path != "/" else None

    def glob_label(self, path: str) -> str | None:
        parts = path.split("/")
        k = next(i for i, part in enumerate(parts) if GLOB.search(part))
        base = "/".join(parts[:k]) or "/"
        if base == "/":
            return "everything under the filesystem root /"
        if k < len(parts) - 1:
            return "the git metadata (.git)" if ".git" in parts[k + 1:] else None
        what = self.label(base) if CATCH_ALL.fullmatch(parts[k]) else None
        return f"everything in {what}" if what else None

    def everything(self, pathspec: str) -> bool:
        path = self.path(pathspec) if pathspec not in EVERYTHING else self.cwd
        return pathspec in EVERYTHING or pathspec.startswith(":(") and pathspec.endswith(")") \
            or path is not None and (path == self.cwd or self.repo.startswith(path + "/"))

    def path(self, word: str) -> str | None:
        """`word` as an absolute normalized path, as the shell would expand it; None if unknown."""
        for text in PWD:
            word = word.replace(text, self.cwd)
        for text in TOPLEVEL:
            word = word.replace(text, self.repo)
        if "$(" in word or "`" in word:
            return None
        if word.startswith("~"):
            user, _, rest = word[1:].partition("/")
            if user:
                return None
            word = f"{self.env['HOME']}/{rest}"
        word = VAR.sub(self.var, word)
        return normalize(word if word.startswith("/") else f"{self.cwd}/{word}") if word else None

    def paths(self, word: str, on_disk: bool = False) -> list[str]:
        """Every path `word` may stand for: once per value of a `for` variable in it and, with
        `on_disk`, once per existing file its glob matches (the shell's expansion)."""
        loop = next((n for n in self.loops if f"${n}" in word or f"${{{n}}}" in word), None)
        out = []
        for value in self.loops[loop][:64] if loop else [None]:
            saved = self.vars
            self.vars = {**saved, loop: value} if loop else saved
            path = self.path(word)
            self.vars = saved
            if path and on_disk and GLOB.search(path):
                import glob

                out += sorted(glob.glob(path)) or [path]
            elif path:
                out.append(path)
        return out

    def var(self, m: re.Match) -> str:
        name, op, alt = m.group(1) or m.group(4), m.group(2), m.group(3) or ""
        value = self.cwd if name == "PWD" else self.vars.get(name, self.env.get(name, ""))
        if op in (":+", "+"):
            return alt if value else ""
        return value or (alt if op else "")

    def assign(self, words: list[str]) -> None:
        for word in words:
            if ASSIGN.match(word):
                name, _, value = word.partition("=")
                self.vars[name.rstrip("+")] = VAR.sub(self.var, value)

    # -- files the command writes and reads ------------------------------------------------------

    def record_writes(self, cmd: Cmd, words: list[str]) -> None:
        out = self.produced(cmd, words)
        for op, target in cmd.redirects:
            for path in self.paths(target, on_disk=True) if op in OUTPUT else []:
                self.wrote(path, out, append=op.endswith(">>"))
        name = command_name(words[0]) if words else ""
        if name in ("apply_patch", "applypatch"):
            self.record_patch(cmd.stdin if cmd.stdin is not None else " ".join(words[1:]))
        for target, source in written_by(words) if words else []:
            for path in self.paths(target, on_disk=True):
                if source and (target.endswith("/") or os.path.isdir(path)):
                    path = f"{path}/{posixpath.basename(source)}"
                self.wrote(path, self.stdin_text(cmd) if name == "tee" else None)

    def record_patch(self, text: str) -> None:
        for action, raw, added in patch_changes(text):
            if (path := self.path(raw)) and action == "delete":
                self.deleted.add(path)
                self.files.pop(path, None)
            elif path:
                self.wrote(path, added)

    def wrote(self, path: str, text: str | None, append: bool = False) -> None:
        self.writes.append(path)
        self.deleted.discard(path)
        if text is None:
            self.files.pop(path, None)
        else:
            self.files[path] = self.files.get(path, "") + text if append else text

    def produced(self, cmd: Cmd, words: list[str], hops: int = 8) -> str | None:
        """What a command writes to stdout, when that is knowable (echo, printf, cat)."""
        name = command_name(words[0]) if words else ""
        if name in ("echo", "printf"):
            return " ".join(a for a in words[1:] if a not in ("-e", "-n", "-E")).replace(
                "\\n", "\n")
        files = [a for a in words[1:] if not a.startswith("-")]
        if name == "cat" and files:
            return "\n".join(self.script(f, True) or "" for f in files)
        return self.stdin_text(cmd, hops) if name in ("cat", "tee") else None

    def stdin_text(self, cmd: Cmd, hops: int = 8) -> str | None:
        """What a command reads on stdin: a heredoc, a `<` file, or what a known producer pipes
        into it (followed back at most `hops` pipe stages)."""
        if cmd.stdin is not None:
            return cmd.stdin
        for op, target in cmd.redirects:
            if op == "<":
                return self.script(target, True)
        if cmd.pipe_from is not None and hops:
            return self.produced(cmd.pipe_from, self.unwrap(cmd.pipe_from.words)[0], hops - 1)
        return None

    def script(self, word: str, any_file: bool = False) -> str | None:
        """The text of a file a command runs: written earlier by this command, or on disk."""
        path = self.path(word)
        if path is None or path in self.files:
            return None if path is None else self.files[path]
        try:
            with open(path, "rb") as fh:
                data = fh.read(MAX_SCRIPT)
        except OSError:
            return None
        text = data.decode("utf-8", "replace")
        if any_file or path.endswith((".sh", ".bash")) or SHEBANG.match(text):
            return text
        return None
