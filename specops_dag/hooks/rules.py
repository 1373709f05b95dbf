"""What the PreToolUse hook denies (seed 001 §7), in one auditable file: recursive and wildcard
deletes of guarded paths and bulk deletes inside the repository, the harness root or the target
other than of build output and the node folder's scratch (`rm`, `find`, `git rm`, `rsync
--delete`, `shred`) and moves of their files out of them (`mv`, `rsync --remove-source-files`),
deletes of paths computed at run time, history-rewriting and
work-discarding git, any other git that writes the repository's `.git` (read-only in the
agent's sandbox: it would only fail there) and every push, `dd` or `shred` onto a disk,
`dotnet ef database drop`, SQL that destroys tables or rows, `mkfs`, interactive database shells
and F# sessions, and the labels of the guarded paths. Each rule takes the `walk.Walk` that read
the command and returns the deny reason or None; each alternative a reason suggests is one the
agent can run in its sandbox (read-only `.git`, no network) and this hook allows
(tests/hooks/test_deny_alternatives.py). It never parses command text itself and imports only
the standard library and `shell`."""

from __future__ import annotations

import os
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
# Folders a bulk delete may take inside the repository: build output, rebuilt by `dotnet build`.
BUILD_OUTPUT = {"bin", "obj", "testresults", "node_modules"}
FIND_ONE_ARG = {"-type", "-xtype", "-size", "-user", "-group", "-perm", "-newer", "-mtime",
                "-mmin", "-atime", "-amin", "-ctime", "-cmin", "-maxdepth", "-mindepth", "-links",
                "-inum", "-samefile", "-fstype", "-uid", "-gid", "-used", "-lname", "-ilname",
                "-context", "-printf", "-fprint", "-fprint0", "-fls", "-regextype",
                "-files0-from", "-anewer", "-cnewer"}  # and -newerXY (-newermt …)
FIND_EXEC = {"-exec", "-execdir", "-ok", "-okdir"}
DELETERS = {"rm", "unlink", "shred"}
# rsync's options that take the next word as their value, and its short ones that do
RSYNC_VALUE_OPTIONS = {
    "--rsh", "--filter", "--exclude", "--include", "--exclude-from", "--include-from",
    "--files-from", "--temp-dir", "--partial-dir", "--backup-dir", "--suffix", "--compare-dest",
    "--copy-dest", "--link-dest", "--chmod", "--chown", "--block-size", "--bwlimit",
    "--max-size", "--min-size", "--max-delete", "--max-alloc", "--timeout", "--contimeout",
    "--port", "--sockopts", "--password-file", "--log-file", "--log-file-format",
    "--out-format", "--remote-option", "--rsync-path", "--info", "--debug", "--usermap",
    "--groupmap", "--modify-window", "--iconv", "--checksum-choice", "--compress-choice",
    "--compress-level", "--skip-compress", "--outbuf", "--write-batch", "--only-write-batch",
    "--read-batch", "--protocol", "--checksum-seed", "--address", "--stop-after", "--stop-at",
    "--early-input", "--copy-as"}
RSYNC_VALUE_LETTERS = "efTBM@"
REMOTE = re.compile(r"[^/]*:|rsync://")  # host:path, host::module, rsync://host/…
# What every delete reason suggests instead (the worktree's `.git` is read-only and codex itself
# rejects `rm -f`, so neither `git rm`/`git clean` nor `rm -rf` is an alternative).
DELETE_INSTEAD = ("delete single files by name (`rm <file>`, or apply_patch "
                  "`*** Delete File: <file>`) and build output by folder (`rm -r bin`)")
KEEP = "to keep a file's changes, copy it aside (`cp <file> /tmp/`)"
UNDO = "to undo a file's changes, run `git show HEAD:<file> > <file>`"
PUSH_NOTHING = "the product commits and pushes after validation: push nothing"
GIT_WRITE = ("writes the git metadata (.git), read-only in this session: the product commits "
             "after validation; leave your changes in the working tree (see them with "
             "`git status` and `git diff`); " + UNDO)
# The EF Core tools are a download the offline sandbox cannot make (the ef-core-migrations skill).
MIGRATION_INSTEAD = ("change the schema with a new migration instead, written by hand as the "
                     "ef-core-migrations skill says (apply_patch "
                     "`*** Add File: <project>/Migrations/<timestamp>_<Name>.cs`, with the test "
                     "that proves it): the EF Core tools cannot be restored offline")
MOVE_INSTEAD = "copy it out instead (`cp -r <path> /tmp/`), and move files only within {what}"
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
    for target in targets:
        why = computed(walk, target) or next(filter(None, (
            delete_reason(walk, p, recursive) for p in walk.paths(target))), None)
        if why:
            return f"`{shown(words)}` {why}; {DELETE_INSTEAD}"
    return None


def computed(walk: Walk, word: str) -> str | None:
    if walk.known(word) and walk.paths(word):
        return None
    return "deletes a path computed at run time, which the hook cannot check"


def delete_reason(walk: Walk, path: str, recursive: bool) -> str | None:
    """What deleting `path` (recursively, or every file its wildcard matches) would destroy."""
    if GLOB.search(path):
        if what := glob_label(walk, path):
            return f"deletes {what}"
        place = bulk_place(walk, path)
        return place and f"deletes every file of {place[1]} that `{place[0]}` matches"
    if not recursive:
        return None  # one file, by name
    if what := label(walk, path):  # a worktree's `.git` is a file
        return f"deletes {what}"
    if os.path.isfile(path) or os.path.islink(path):
        return None
    place = bulk_place(walk, path)
    return place and f"deletes the folder `{place[0]}` of {place[1]} with every file in it"


def within(path: str, tree: str) -> bool:
    """`path` is `tree` or inside it (both absolute, normalized)."""
    return path == tree or path.startswith(tree + "/")


def bulk_place(walk: Walk, path: str) -> tuple[str, str] | None:
    """(path relative to it, label) of the repository, target or harness root `path` is in,
    unless it is build output or scratch in the node folder, the only places a delete may take
    files in bulk: anywhere else they may be tracked work, and the hook cannot tell."""
    if walk.scratch and path.startswith(walk.scratch + "/"):
        return None
    for tree, what in walk.trees:
        if within(path, tree):
            rel = path[len(tree) + 1:]
            if BUILD_OUTPUT.isdisjoint(p.lower() for p in rel.split("/")) or not rel:
                return rel or ".", what
            return None
    for tree, what in walk.trees:
        if tree.startswith(path.rstrip("/") + "/"):
            return ".", what
    return None


def mv(walk: Walk, words: list[str]) -> str | None:
    """Moving tracked work out of the folder tree that holds it deletes it there, as `rm -r`
    would; moves within it, and of build output or scratch, are a rename."""
    sources, target, options, args = [], None, True, words[1:]
    i = 0
    while i < len(args):
        arg, i = args[i], i + 1
        if options and arg == "--":
            options = False
        elif options and arg.startswith("--target-directory="):
            target = arg.partition("=")[2]
        elif options and arg in ("--target-directory", "--suffix"):
            value, i = (args[i] if i < len(args) else ""), i + 1
            target = value if arg == "--target-directory" else target
        elif options and short(arg) and ("t" in arg or "S" in arg):
            k = min(arg.find(c) for c in "tS" if c in arg)  # -vt DIR, -tDIR, -S.bak
            value = arg[k + 1:]
            if not value:
                value, i = (args[i] if i < len(args) else ""), i + 1
            target = value if arg[k] == "t" else target
        elif not (options and arg.startswith("-") and arg != "-"):
            sources.append(arg)
    if target is None and len(sources) > 1:
        target = sources.pop()
    if target is None:
        return None
    dests = walk.paths(target) if walk.known(target) else []
    for source in sources:
        if computed(walk, source):
            if not dests or not all(in_work_tree(walk, d) for d in dests):
                return (f"`{shown(words)}` moves a path computed at run time, which the hook "
                        "cannot check; " + MOVE_INSTEAD.format(what="the repository"))
            continue
        for path in walk.paths(source):
            if place := moved_out(walk, path, dests):
                return f"`{shown(words)}` {place[0]}; " + MOVE_INSTEAD.format(what=place[1])
    return None


def moved_out(walk: Walk, path: str, dests: list[str]) -> tuple[str, str] | None:
    """(the harm, the label) of moving `path` to `dests` (none: a path computed at run time),
    if that takes it out of the repository, target or harness root that holds it."""
    place = bulk_place(walk, path)
    if place is None:
        return None
    rel, what = place
    tree = next(tree for tree, label in walk.trees if label == what)
    if not dests:
        return (f"moves `{rel}` of {what} to a path computed at run time, which the hook cannot "
                "check"), what
    if any(not within(d, tree) for d in dests):
        return f"moves `{rel}` out of {what}, which deletes it there", what
    return None


def find(walk: Walk, words: list[str]) -> str | None:
    args = words[1:]
    k = 0
    while k < len(args) and (args[k] in ("-H", "-L", "-P") or args[k].startswith("-O")):
        k += 1
    end = next((i for i in range(k, len(args)) if args[i][:1] in "-(!"), len(args))
    starts, expr = args[k:end] or ["."], args[end:]
    for i, arg in enumerate(expr):
        if arg in FIND_EXEC:  # `{}` is each file found, which the delete check below covers
            inner = [w for w in exec_words(expr, i) if "{}" not in w]
            if inner and (reason := walk.check(inner, Cmd())):
                return reason
    if not FindExpr(walk, expr).unsafe:
        return None
    filtered = any(a in NAME_TESTS and not CATCH_ALL.fullmatch(b)
                   for a, b in zip(expr, expr[1:], strict=False))
    for start in starts:
        if why := computed(walk, start):
            return f"`{shown(words)}` {why}; {DELETE_INSTEAD}"
        for path in walk.paths(start):
            what = label(walk, path)
            if what and not filtered:
                return f"`{shown(words)}` deletes everything in {what}; {DELETE_INSTEAD}"
            if place := bulk_place(walk, path):
                under = f" under `{place[0]}`" if place[0] != "." else ""
                return (f"`{shown(words)}` deletes files of {place[1]}{under} in bulk; "
                        f"{DELETE_INSTEAD}")
    return None


def exec_words(expr: list[str], i: int) -> list[str]:
    """The command of the `-exec` (or -execdir, -ok, -okdir) at `expr[i]`."""
    end = next((j for j in range(i + 1, len(expr)) if expr[j] in (";", "+")), len(expr))
    return expr[i + 1:end]


class FindExpr:
    """A find expression, read for one question (`unsafe`): may a delete action (-delete, or
    -exec of rm, unlink or shred) run on a file that no build-output name test (`-name bin`,
    `-path '*/obj/*'`) chose? `!`, `-o` and `,` are followed; what it cannot read is unsafe."""

    def __init__(self, walk: Walk, expr: list[str]) -> None:
        self.walk, self.expr, self.i = walk, expr, 0
        _, self.unsafe = self.alternatives(False)
        if self.i < len(expr):  # a stray `)`: the rest cannot be read
            self.unsafe = self.unsafe or any(self.deletes(j) for j in range(len(expr)))

    def peek(self) -> str | None:
        return self.expr[self.i] if self.i < len(self.expr) else None

    def alternatives(self, chosen: bool) -> tuple[bool, bool]:
        """(true only for build output, a delete may run elsewhere) of `a -o b` or `a , b`."""
        only_build, unsafe = self.sequence(chosen)
        while self.peek() in ("-o", "-or", ","):
            op = self.expr[self.i]
            self.i += 1
            build, risky = self.sequence(chosen)
            only_build = only_build and build if op != "," else build
            unsafe = unsafe or risky
        return only_build, unsafe

    def sequence(self, chosen: bool) -> tuple[bool, bool]:
        only_build, unsafe = self.term(chosen)
        while self.peek() not in (None, ")", "-o", "-or", ","):
            self.i += self.peek() in ("-a", "-and")
            build, risky = self.term(chosen or only_build)
            only_build, unsafe = only_build or build, unsafe or risky
        return only_build, unsafe

    def term(self, chosen: bool) -> tuple[bool, bool]:
        word = self.peek()
        self.i += 1
        if word in ("!", "-not"):
            return False, self.term(chosen)[1]
        if word == "(":
            result = self.alternatives(chosen)
            self.i += self.peek() == ")"
            return result
        if word in NAME_TESTS:
            value = self.peek() or ""
            self.i += 1
            return not BUILD_OUTPUT.isdisjoint(p.lower() for p in value.split("/")), False
        if word in FIND_EXEC:
            deletes = self.deletes(self.i - 1)
            self.i += len(exec_words(self.expr, self.i - 1)) + 1
            return False, deletes and not chosen
        self.i += word == "-fprintf" or word in FIND_ONE_ARG or (word or "").startswith("-newer")
        self.i += word == "-fprintf"
        return False, word == "-delete" and not chosen

    def deletes(self, j: int) -> bool:
        if self.expr[j] == "-delete":
            return True
        inner = self.walk.unwrap(exec_words(self.expr, j))[0] if self.expr[j] in FIND_EXEC \
            else []
        return bool(inner) and command_name(inner[0]) in DELETERS


def git(walk: Walk, words: list[str]) -> str | None:
    i, place = git_place(walk, words)
    sub, args = (words[i], words[i + 1:]) if i < len(words) else ("", [])
    flags = "".join(a[1:] for a in args if short(a))
    paths = args[args.index("--") + 1:] if "--" in args else [
        a for a in args if not a.startswith("-")]
    everything = next((p for p in paths if is_everything(walk, p)), None)
    why = None
    if sub == "push":
        why = push(args) or f"pushes to a remote; {PUSH_NOTHING}"
    elif sub == "reset" and "--hard" in args:
        why = f"discards uncommitted changes; {KEEP}; {UNDO}"
    elif sub == "clean" and ("f" in flags or "--force" in args) and not (
            "n" in flags or "--dry-run" in args or "X" in flags and "x" not in flags):
        why = ("deletes untracked files, which may be new work; delete build output by folder "
               "instead (`rm -r bin`)")
    elif sub in ("checkout", "switch") and ("f" in flags or {"--force", "--discard-changes"}
                                            & set(args)):
        why = ("discards uncommitted changes (a forced checkout); stay on this branch, which "
               "the product commits after validation")
    elif sub in ("checkout", "restore") and everything and (sub == "checkout" or "W" in flags
            or "--worktree" in args or not ("S" in flags or "--staged" in args)):
        why = f"discards every uncommitted change under `{everything}`; {UNDO}"
    elif sub == "rm" and "--cached" not in args:
        why = git_rm(walk, paths, everything, "r" in flags or "--recursive" in args)
    if not why and in_work_tree(walk, place) and git_writes(walk, sub, args):
        why = GIT_WRITE
    return f"`{shown(words)}` {why}" if why else None


def git_place(walk: Walk, words: list[str]) -> tuple[int, str | None]:
    """The index of git's subcommand in `words` and the folder whose repository it uses (the
    cwd, or where `-C`, `--git-dir` or `--work-tree` point); None if computed at run time."""
    i, place = 1, walk.cwd
    while i < len(words) and words[i].startswith("-"):
        option, _, value = words[i].partition("=")
        if option in GIT_VALUE_OPTIONS and not value:
            value, i = (words[i + 1] if i + 1 < len(words) else ""), i + 1
        if option == "-C" and place and value:
            place = walk.path(value) if place == walk.cwd or value[:1] in "/~$" \
                else posixpath.normpath(f"{place}/{value}")
        elif option in ("--git-dir", "--work-tree"):
            place = walk.path(value)
        i += 1
    return i, place


def in_work_tree(walk: Walk, place: str | None) -> bool:
    return place is None or any(within(place, tree) for tree, _ in walk.trees)


# git subcommands that write the repository's .git (index, refs, objects, config), which is
# read-only in the agent's sandbox; the others read it, or write only the working tree.
GIT_WRITES = {"add", "stage", "am", "commit", "commit-tree", "merge", "rebase", "cherry-pick",
              "revert", "reset", "checkout", "switch", "restore", "mv", "rm", "fetch", "pull",
              "gc", "prune", "repack", "pack-refs", "maintenance", "update-index", "update-ref",
              "read-tree", "write-tree", "mktag", "mktree", "fast-import", "filter-branch",
              "update-server-info"}
# ... that only read when their first argument is one of these ("": none)
GIT_READ_VERBS = {"stash": {"list", "show"}, "worktree": {"list"}, "sparse-checkout": {"list"},
                  "bisect": {"log", "visualize", "view", "help"}, "replace": {"", "-l", "--list"}}
# ... that write when one of their arguments is one of these
GIT_WRITE_VERBS = {
    "remote": {"add", "rm", "remove", "rename", "set-url", "set-head", "set-branches", "prune",
               "update"},
    "notes": {"add", "copy", "append", "edit", "merge", "remove", "prune"},
    "reflog": {"expire", "delete"}, "commit-graph": {"write"},
    "submodule": {"add", "init", "deinit", "update", "sync", "set-branch", "set-url",
                  "absorbgitdirs"}}
# branch and tag: (short and long options that write, that list); a name alone creates a ref
GIT_REFS = {
    "branch": ("dDmMcCuft", {"--delete", "--move", "--copy", "--set-upstream-to",
                             "--unset-upstream", "--edit-description", "--force", "--track",
                             "--create-reflog"},
               "lv", {"--list", "--verbose", "--contains", "--no-contains", "--merged",
                      "--no-merged", "--points-at", "--show-current"}),
    "tag": ("asumFdfe", {"--annotate", "--sign", "--local-user", "--message", "--file",
                         "--delete", "--force", "--edit", "--create-reflog"},
            "lnv", {"--list", "--contains", "--no-contains", "--merged", "--no-merged",
                    "--points-at", "--verify"})}
CONFIG_WRITES = {"--unset", "--unset-all", "--add", "--replace-all", "--rename-section",
                 "--remove-section", "-e", "--edit", "set", "unset", "rename-section",
                 "remove-section", "edit"}
CONFIG_READS = {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--get-color",
                "--get-colorbool", "-l", "--list", "get", "list"}


def git_writes(walk: Walk, sub: str, args: list[str]) -> bool:
    """Whether `git <sub> <args>` writes the repository's .git."""
    if "--help" in args or args[:1] == ["-h"]:
        return False
    letters = "".join(a[1:] for a in args if short(a))
    options = {a.partition("=")[0] for a in args if a.startswith("--")}
    if sub in GIT_READ_VERBS:
        return (args[0] if args else "") not in GIT_READ_VERBS[sub]
    if sub in GIT_WRITE_VERBS:
        return not GIT_WRITE_VERBS[sub].isdisjoint(args)
    if sub in GIT_REFS:
        write_letters, writes, list_letters, lists = GIT_REFS[sub]
        names = [a for k, a in enumerate(args) if not a.startswith("-")
                 and args[k - 1] not in ("--sort", "--format")]
        return bool(set(write_letters) & set(letters) or writes & options) or bool(
            names) and not (set(list_letters) & set(letters) or lists & options)
    if sub == "config":
        return config_writes(walk, args)
    if sub == "apply":
        return "3" in letters or not {"--index", "--cached", "--3way"}.isdisjoint(options)
    if sub == "hash-object":
        return "w" in letters
    if sub == "symbolic-ref":
        return "d" in letters or "--delete" in options or len(
            [a for a in args if not a.startswith("-")]) > 1
    return sub in GIT_WRITES


def config_writes(walk: Walk, args: list[str]) -> bool:
    """`git config` writes the repository's config: not with --global, --system or a file
    outside .git (`-f .gitmodules`), and not when it only reads (`--get`, one key alone)."""
    words, i = [], 0
    while i < len(args):
        option, _, value = args[i].partition("=")
        if option in ("-f", "--file", "--blob", "--type", "--default", "--comment") and not value:
            value, i = (args[i + 1] if i + 1 < len(args) else ""), i + 1
        i += 1
        if option in ("--global", "--system") or option in ("-f", "--file", "--blob") and (
                ".git" not in (walk.path(value) or "/.git").split("/")):
            return False
        if option in CONFIG_WRITES or option in CONFIG_READS and not words:
            return option in CONFIG_WRITES
        if not option.startswith("-"):
            words.append(args[i - 1])
    return len(words) > 1


def git_rm(walk: Walk, paths: list[str], everything: str | None,
           recursive: bool) -> str | None:
    if everything and recursive:
        return f"removes every tracked file; {DELETE_INSTEAD}"
    for pathspec in paths:
        why = computed(walk, pathspec) or next(filter(None, (
            delete_reason(walk, p, recursive) for p in walk.paths(pathspec))), None)
        if why:
            return f"{why}; {DELETE_INSTEAD}"
    return None


def push(args: list[str]) -> str | None:
    for arg in args:
        force = arg in ("--force", "--mirror", "--force-if-includes") or arg.startswith(
            "--force-with-lease") or short(arg) and "f" in arg
        if force or not arg.startswith("-") and arg.startswith("+"):
            return f"force-pushes (`{arg}`), which rewrites remote history; {PUSH_NOTHING}"
        if arg in ("--delete", "--prune") or short(arg) and "d" in arg or arg.startswith(
                ":") and len(arg) > 1:
            return f"deletes remote branches (`{arg}`); {PUSH_NOTHING}"
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
        return f"`{shown(words)}` drops the database; {MIGRATION_INSTEAD}"
    return None


def rsync(walk: Walk, words: list[str]) -> str | None:
    """`rsync --delete` deletes every file of its destination that its source lacks (all of
    them, from an empty source), a bulk delete; `--remove-source-files` moves its sources, as
    `mv` does. A dry run (`-n`) changes nothing."""
    options, positional, args, i = set(), [], words[1:], 0
    while i < len(args):
        arg, i = args[i], i + 1
        if arg == "--":
            positional += args[i:]
            break
        if arg.startswith("--"):
            name, eq, _ = arg.partition("=")
            options.add(name)
            i += name in RSYNC_VALUE_OPTIONS and not eq
        elif short(arg):
            letters = arg[1:]
            k = next((j for j, c in enumerate(letters) if c in RSYNC_VALUE_LETTERS), None)
            options |= {f"-{c}" for c in letters[:k]}
            i += k is not None and k == len(letters) - 1
        else:
            positional.append(arg)
    deletes = any(o == "--del" or o.startswith("--delete") for o in options)
    removes = any(o.startswith("--remove-s") for o in options)
    if len(positional) < 2 or not (deletes or removes) or options & {"-n", "--dry-run",
                                                                   "--list-only"}:
        return None
    *sources, dest = positional
    remote = REMOTE.match(dest) is not None
    dests = [dest] if remote else walk.paths(dest) if walk.known(dest) else []
    if deletes and not remote:
        if not dests:
            return f"`{shown(words)}` {computed(walk, dest)}; {DELETE_INSTEAD}"
        for path in dests:
            if what := label(walk, path):
                return (f"`{shown(words)}` deletes every file in {what} that its source lacks; "
                        f"{DELETE_INSTEAD}")
            if place := bulk_place(walk, path):
                under = f" under `{place[0]}`" if place[0] != "." else ""
                return (f"`{shown(words)}` deletes every file of {place[1]}{under} that its "
                        f"source lacks; {DELETE_INSTEAD}")
    if removes:
        for source in sources:
            if computed(walk, source):
                return (f"`{shown(words)}` moves a path computed at run time, which the hook "
                        "cannot check; " + MOVE_INSTEAD.format(what="the repository"))
            for path in [] if REMOTE.match(source) else walk.paths(source):
                if place := moved_out(walk, path, dests):
                    return f"`{shown(words)}` {place[0]}; " + MOVE_INSTEAD.format(what=place[1])
    return None


def shred(walk: Walk, words: list[str]) -> str | None:
    """shred overwrites each file it is given beyond recovery (and deletes it with `-u`): denied
    for the files of the repository, the target and the harness root other than build output
    and scratch, as a bulk delete of them is, and for disk devices, as `dd` onto them is."""
    remove, targets, options, args, i = False, [], True, words[1:], 0
    while i < len(args):
        arg, i = args[i], i + 1
        if options and arg == "--":
            options = False
        elif options and arg.startswith("--"):
            remove |= arg.partition("=")[0] == "--remove"
            i += arg in ("--iterations", "--size", "--random-source")
        elif options and short(arg):  # -n N and -s N take a value: `-vun3`, `-n 3`
            k = next((j for j, c in enumerate(arg) if c in "ns"), len(arg))
            remove |= "u" in arg[:k]
            i += k == len(arg) - 1
        elif arg != "-":
            targets.append(arg)
    harm = "overwrites and deletes" if remove else "overwrites"
    for target in targets:
        if why := computed(walk, target):
            return f"`{shown(words)}` {why.replace('deletes', harm, 1)}; {DELETE_INSTEAD}"
        for path in walk.paths(target):
            if path.startswith("/dev/") and not SAFE_DEVICES.fullmatch(path):
                return f"`{shown(words)}` overwrites the disk device {path}; never run it here"
            if place := bulk_place(walk, path):
                return (f"`{shown(words)}` {harm} `{place[0]}` of {place[1]} beyond recovery; "
                        f"{DELETE_INSTEAD}")
    return None


def mkfs(walk: Walk, words: list[str]) -> str | None:
    return f"`{shown(words)}` formats a disk; never run it here"


RULES: dict[str, Callable[[Walk, list[str]], str | None]] = {
    "rm": rm, "mv": mv, "git": git, "find": find, "dd": dd, "dotnet": dotnet,
    "dotnet-ef": dotnet, "rsync": rsync, "shred": shred}


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


def work_trees(repo: str, env: dict[str, str]) -> list[tuple[str | None, str]]:
    """(path, label) of the folders whose files may be tracked work: no bulk delete inside."""
    return [(repo, "the repository"), (env.get("SPECOPS_TARGET"), "the target repository"),
            (env.get("SPECOPS_ROOT"), "the harness root")]


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
