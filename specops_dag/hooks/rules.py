"""What the PreToolUse hook denies (seed 001 §7), in one auditable file: recursive and wildcard
deletes of guarded paths (`rm`, `find`), history-rewriting and work-discarding git, `dd` onto a
disk, `dotnet ef database drop`, SQL that destroys tables or rows, `mkfs`, interactive database
shells and F# sessions, and the labels of the guarded paths. Each rule takes the `walk.Walk`
that read the command and returns the deny reason or None; it never parses command text itself
and imports only the standard library and `shell`."""

from __future__ import annotations

import posixpath
import re

from specops_dag.hooks.shell import Cmd

TYPE_CHECKING = False  # `typing` costs more than this hook's work
if TYPE_CHECKING:
    from collections.abc import Callable

    from specops_dag.hooks.walk import Walk

SQL_CLIENTS = {"psql", "mysql", "mariadb", "sqlite3", "sqlcmd", "osql", "isql", "duckdb",
               "clickhouse-client", "cockroach", "mssql-cli", "pgcli", "mycli", "litecli", "usql",
               "sqlplus"}
CONTAINERS = {"docker", "podman", "nerdctl", "kubectl", "oc"}  # `docker exec db psql …`
NAME_TESTS = {"-name", "-iname", "-path", "-ipath", "-wholename", "-regex", "-iregex"}
SAFE_DEVICES = re.compile(r"/dev/(?:null|zero|full|u?random|stdout|stderr|tty|fd/.*)")
GIT_VALUE_OPTIONS = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path",
                     "--config-env", "--super-prefix"}
EVERYTHING = {".", "./", "*", ":/", ":/*", ":(top)", ":(top).", "/"}
GLOB = re.compile(r"[*?\[]")
CATCH_ALL = re.compile(r"[.*?]*[*?][.*?]*")
SQL_DESTROY = re.compile(r"\b(?:drop\s+(?:temporary\s+)?(?:table|database|schema)\b(?:\s+if\s+"
                         r"exists)?\s*[^\s;]*|truncate\s+(?:table\s+)?(?!-)[^\s;]+)", re.I)
SQL_DELETE = re.compile(r"\bdelete\s+from\s+[^\s;]+([^;'\"]*)", re.I)
WHERE = re.compile(r"\bwhere\b", re.I)
SQLITE_READ = re.compile(r"\.read\s+(\S+)")
# How each SQL client takes its statements without a terminal: a flag, or SQL as a positional
# argument after the database (the `*_POSITIONAL` clients).
SQL_INPUT_FLAGS = {"-c", "--command", "-e", "--execute", "-f", "--file", "-i", "--input-file",
                   "-q", "-Q", "--query", "-cmd", "-E"}
SQL_POSITIONAL = {"sqlite3", "duckdb", "litecli"}
INTERACTIVE = ("starts an interactive {what}; what is typed into it later never reaches this "
               "hook, so it is denied: run each command directly (e.g. `bash -c '…'`, "
               "`python3 script.py`, `psql -c '…'`)")


def command_name(word: str) -> str:
    """`/usr/bin/git.exe` → `git`: absolute paths, quoting and `.exe` do not hide a command."""
    name = word.replace("\\", "/").rsplit("/", 1)[-1].lower()
    return name[:-4] if name.endswith(".exe") else name


def shown(words: list[str]) -> str:
    text = " ".join(words)
    return text if len(text) <= 160 else text[:157] + "..."


def short(arg: str) -> bool:
    return arg.startswith("-") and not arg.startswith("--") and len(arg) > 1


# -- the rules, by program ------------------------------------------------------------------------

def rm(walk: Walk, words: list[str]) -> str | None:
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
    for path in (p for target in targets for p in walk.paths(target)):
        what = glob_label(walk, path) if GLOB.search(path) else recursive and label(walk, path)
        if what:
            return (f"`{shown(words)}` deletes {what}; delete only specific paths inside the "
                    "repository, e.g. `rm -rf bin obj`")
    return None


def find(walk: Walk, words: list[str]) -> str | None:
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
            if inner and (reason := walk.check(inner, Cmd())):
                return reason
    filtered = any(a in NAME_TESTS and not CATCH_ALL.fullmatch(b)
                   for a, b in zip(expr, expr[1:], strict=False))
    for path in (p for s in starts for p in walk.paths(s)) if deletes and not filtered else []:
        if what := label(walk, path):
            return (f"`{shown(words)}` deletes everything in {what}; add a -name or -path "
                    "test that names what to delete")
    return None


def git(walk: Walk, words: list[str]) -> str | None:
    i = 1
    while i < len(words) and words[i].startswith("-"):
        i += 2 if words[i] in GIT_VALUE_OPTIONS else 1
    sub, args = (words[i], words[i + 1:]) if i < len(words) else ("", [])
    flags = "".join(a[1:] for a in args if short(a))
    paths = args[args.index("--") + 1:] if "--" in args else [
        a for a in args if not a.startswith("-")]
    everything = next((p for p in paths if is_everything(walk, p)), None)
    why = None
    if sub == "push":
        why = push(args)
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


def push(args: list[str]) -> str | None:
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


def dd(walk: Walk, words: list[str]) -> str | None:
    for arg in words[1:]:
        if arg.startswith("of=/dev/") and not SAFE_DEVICES.fullmatch(arg[3:]):
            return f"`{shown(words)}` overwrites the disk device {arg[3:]}; never run it here"
    return None


def dotnet(walk: Walk, words: list[str]) -> str | None:
    if words[1:2] == ["fsi"] and not any(a.endswith((".fsx", ".fs")) for a in words[2:]):
        return f"`{shown(words)}` " + INTERACTIVE.format(what="F# interpreter")
    ef = words[1:] if command_name(words[0]) == "dotnet-ef" else words[2:] if words[1:2] == [
        "ef"] else []
    if "drop" in ef and "database" in ef[:ef.index("drop")]:
        return (f"`{shown(words)}` drops the database; change the schema with a migration "
                "instead")
    return None


def mkfs(walk: Walk, words: list[str]) -> str | None:
    return f"`{shown(words)}` formats a disk; never run it here"


RULES: dict[str, Callable[[Walk, list[str]], str | None]] = {
    "rm": rm, "git": git, "find": find, "dd": dd, "dotnet": dotnet, "dotnet-ef": dotnet}


def rule_for(name: str) -> Callable[[Walk, list[str]], str | None] | None:
    """The rule of the program `name` (as `command_name` gives it), if one applies to it."""
    return RULES.get(name) or (mkfs if name.startswith("mkfs") else None)



# -- SQL ------------------------------------------------------------------------------------------

def sql_reason(text: str) -> str | None:
    if m := SQL_DESTROY.search(text):
        return (f"`{' '.join(m.group().split())[:80]}` destroys database objects or all their "
                "rows; change the schema or data through a reviewed migration instead")
    for m in SQL_DELETE.finditer(text):
        if not WHERE.search(m.group(1)):
            return (f"`{' '.join(m.group().split())[:80]}` deletes every row (DELETE without "
                    "WHERE); add a WHERE clause naming the rows to delete")
    return None


def sql_client(walk: Walk, words: list[str], cmd: Cmd) -> str | None:
    name = command_name(words[0])
    positional = [a for a in words[1:] if not a.startswith("-")]
    if (name in SQL_CLIENTS and walk.interactive(cmd)
            and SQL_INPUT_FLAGS.isdisjoint(a.split("=")[0] for a in words[1:])
            and not (name in SQL_POSITIONAL and len(positional) >= 2)
            and not any(a in ("--version", "-V", "--help", "-?") for a in words[1:])):
        return f"`{shown(words)}` " + INTERACTIVE.format(what="database shell")
    texts = [*words[1:], walk.stdin_text(cmd) or ""]
    for i, arg in enumerate(words):
        value = words[i + 1] if i + 1 < len(words) else ""
        if arg.startswith("--file="):
            value, arg = arg[7:], "-f"
        if arg in ("-f", "--file", "-i", "--input-file"):
            texts.append(walk.script(value, True) or "")
        texts += [walk.script(f, True) or "" for f in SQLITE_READ.findall(arg)]
    return next(filter(None, map(sql_reason, texts)), None)


# -- guarded paths --------------------------------------------------------------------------------

def guarded_paths(home: str, repo: str, env: dict[str, str]) -> list[tuple[str | None, str]]:
    """(path, what deleting it destroys) of the folders no recursive delete may take."""
    return [("/", "the filesystem root /"), (home, "the home folder"), (repo, "the repository"),
            (env.get("SPECOPS_ROOT"), "the harness root"),
            (env.get("SPECOPS_TARGET"), "the target repository")]


def state_folder(repo: str, env: dict[str, str]) -> str:
    """The delivery state (`phases/` of the harness root), guarded with each delivery in it."""
    return f"{env.get('SPECOPS_ROOT') or repo}/phases"


def label(walk: Walk, path: str) -> str | None:
    """What deleting `path` recursively would destroy, if it is guarded."""
    if ".git" in path.split("/"):
        return "the git metadata (.git)"
    for base, what in walk.guarded:
        if path == base:
            return what
        if base.startswith(path.rstrip("/") + "/"):
            return f"a parent folder of {what}"
    if path == walk.state or posixpath.dirname(path) == walk.state:
        return "the delivery state (phases/)"
    return f"the top-level folder {path}" if path.count("/") == 1 and path != "/" else None


def glob_label(walk: Walk, path: str) -> str | None:
    parts = path.split("/")
    k = next(i for i, part in enumerate(parts) if GLOB.search(part))
    base = "/".join(parts[:k]) or "/"
    if base == "/":
        return "everything under the filesystem root /"
    if k < len(parts) - 1:
        return "the git metadata (.git)" if ".git" in parts[k + 1:] else None
    what = label(walk, base) if CATCH_ALL.fullmatch(parts[k]) else None
    return f"everything in {what}" if what else None


def is_everything(walk: Walk, pathspec: str) -> bool:
    path = walk.path(pathspec) if pathspec not in EVERYTHING else walk.cwd
    return pathspec in EVERYTHING or pathspec.startswith(":(") and pathspec.endswith(")") \
        or path is not None and (path == walk.cwd or walk.repo.startswith(path + "/"))
