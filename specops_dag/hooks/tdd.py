"""The TDD rule of the PreToolUse hook (seed 001 §7): whether every C# product file an edit
touches has a matching test file, under the rule set `workflow_defs/hooks.json` of the harness
root as `specops new` froze it into the delivery's snapshot, validated at load. It never reads
commands or patches (`walk` and `patch` do); standard library only, besides the `errors` family
its ConfigError belongs to."""

from __future__ import annotations

import json
import os
import posixpath
import re

from specops_dag.errors import UsageError

TYPE_CHECKING = False  # `typing` costs more than this hook's work
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

CONFIG = "workflow_defs/hooks.json"
FROZEN_KIND = "hooks"  # the snapshot entry of the hooks.json `specops new` froze
DEFAULT_PATTERNS = ("{stem}Tests.cs", "{stem}Test.cs")
DEFAULT_ROOTS = ("tests", "test")
KEYS = {"testPatterns", "testRoots", "exclude", "generated"}
# The rule set is a person's to fix (the agent's sandbox cannot write workflow_defs/).
UNTIL_FIXED = ("C# edits are denied until a person fixes the file: name it in the file the "
               "current step names under RISK")
# Build outputs, VCS and package folders, and fixtures are neither product code nor test evidence.
SKIP_DIRS = {"bin", "obj", ".git", ".vs", "node_modules", ".nuget", "fixtures"}
TEST_DIRS = {"tests", "test"}
TEST_PROJECT = re.compile(r"(?i).+[._-](?:unit|integration|functional|acceptance|e2e)?tests?")
# What makes C# text hold behaviour, once comments, strings and attributes are gone: a body
# (`) {`, an accessor with a body, `=>`), a statement keyword, a class or struct (which may hold
# either). Interfaces, enums, positional records and member signatures hold none.
DECLARATION = re.compile(r"\b(?:interface|enum|record)\s+[A-Za-z_]\w*")
COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
STRINGS = re.compile(r"@?\$?\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])'")
ATTRIBUTES = re.compile(r"^\s*\[[^\]]*\]", re.M)
BEHAVIOUR = re.compile(r"=>|\)\s*\{|\b(?:get|set|init|add|remove)\s*\{|\b(?:return|if|else|for|"
                       r"foreach|while|do|switch|case|new|throw|try|await|yield|class|struct|"
                       r"operator|delegate|event)\b")


class ConfigError(UsageError):
    """`workflow_defs/hooks.json` cannot be used; C# edits are denied until it is fixed."""


class Rules:
    """The validated `tdd` section: file name patterns, test roots, exact excludes, generated."""

    __slots__ = ("patterns", "roots", "exclude", "generated")

    def __init__(self, patterns: Iterable[str] = DEFAULT_PATTERNS,
                 roots: Iterable[str] = DEFAULT_ROOTS, exclude: dict[str, str] | None = None,
                 generated: Iterable[str] = ()) -> None:
        self.patterns: tuple[str, ...] = tuple(patterns)
        self.roots: tuple[str, ...] = tuple(roots)
        self.exclude: dict[str, str] = dict(exclude or {})
        self.generated: tuple[str, ...] = tuple(generated)


def load_rules(root: str, delivery: str = "") -> Rules:
    """The rule set of `delivery`: the copy of hooks.json `specops new` froze into
    `<root>/phases/<delivery>/snapshot/` (the defaults when it froze none). Without a delivery,
    or for one frozen before hooks.json was, `<root>/workflow_defs/hooks.json` as it is now.
    Defaults when absent; ConfigError when malformed, unreadable or changed since it was frozen."""
    if delivery:
        frozen = frozen_entry(root, delivery)
        if frozen is not None:
            return frozen_rules(os.path.join(root, "phases", delivery, frozen[0]), frozen[1])
    path = os.path.join(root, CONFIG)
    raw = read_config(path)
    return Rules() if raw is None else parse_rules(raw, path)


def read_config(path: str) -> bytes | None:
    """The file's bytes; None when there is none."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise ConfigError(f"{path}: cannot be read ({err.strerror}); {UNTIL_FIXED}") from err


def parse_rules(raw: bytes, path: str) -> Rules:
    """The rules in a hooks.json's bytes, named `path` in messages; ConfigError when malformed."""
    try:
        data = json.loads(raw)
    except ValueError as err:
        raise _bad(path, "(file)", f"not valid JSON ({err})") from err
    return _rules(path, data)


def frozen_entry(root: str, delivery: str) -> tuple[str, str | None] | None:
    """(copy, sha256) of the delivery's frozen hooks.json as its state records them (sha256 None:
    frozen as absent), or None when its snapshot predates frozen hook rules."""
    if not delivery.strip(".") or "/" in delivery or os.sep in delivery:
        raise ConfigError(f"SPECOPS_DELIVERY `{delivery}` is not a delivery id, so the hook "
                          f"cannot find its frozen {CONFIG}; {UNTIL_FIXED}")
    index = os.path.join(root, "phases", delivery, "index.json")
    try:
        with open(index, "rb") as fh:
            files = json.loads(fh.read())["snapshot"]["files"]
        entry = next((f for f in files if f.get("kind") == FROZEN_KIND), None)
        if entry is None:
            return None
        copy, sha = entry["copy"], entry["sha256"]
    except (OSError, ValueError, LookupError, TypeError, AttributeError) as err:
        why = err.strerror if isinstance(err, OSError) else f"{type(err).__name__}: {err}"
        raise ConfigError(f"{index}: the delivery's state cannot be read ({why}), so its frozen "
                          f"{CONFIG} is unknown; {UNTIL_FIXED}") from err
    if not isinstance(copy, str) or not copy.startswith("snapshot/") or ".." in copy.split("/") \
            or not (sha is None or isinstance(sha, str)):
        raise ConfigError(f"{index}: snapshot.files: the `{FROZEN_KIND}` entry is malformed; "
                          f"{UNTIL_FIXED}")
    return copy, sha


def frozen_rules(path: str, sha: str | None) -> Rules:
    """The rules of a frozen copy, refused unless it still has the sha256 `specops new` recorded
    (or, frozen as absent, still does not exist)."""
    raw = read_config(path)
    if raw is None and sha is None:
        return Rules()
    import hashlib

    now = hashlib.sha256(raw).hexdigest() if raw is not None else None
    if raw is not None and now == sha:
        return parse_rules(raw, path)
    if now is None:
        what = "is missing"
    elif sha is None:
        what = f"appeared since `specops new` froze the delivery without it (sha256 {now[:12]})"
    else:
        what = f"changed since `specops new` froze it (sha256 {now[:12]}, frozen {sha[:12]})"
    raise ConfigError(f"{path} {what}: a delivery runs only the hook rules it was created with; "
                      f"{UNTIL_FIXED}")


def _bad(path: str, field: str, problem: str) -> ConfigError:
    return ConfigError(f"{path}: {field}: {problem}; {UNTIL_FIXED}")


def _rules(path: str, data: object) -> Rules:
    if not isinstance(data, dict):
        raise _bad(path, "(file)", 'must be a JSON object like {"tdd": {...}}')
    for key in data:
        if key != "tdd":
            raise _bad(path, key, "unknown key (allowed: tdd)")
    tdd = data.get("tdd", {})
    if not isinstance(tdd, dict):
        raise _bad(path, "tdd", "must be an object")
    for key in tdd:
        if key not in KEYS:
            raise _bad(path, f"tdd.{key}", f"unknown key (allowed: {', '.join(sorted(KEYS))})")
    patterns = _strings(path, tdd, "testPatterns", DEFAULT_PATTERNS)
    for i, pattern in enumerate(patterns):
        where = f"tdd.testPatterns[{i}]"
        if "{stem}" not in pattern:
            raise _bad(path, where, f"`{pattern}` must contain {{stem}}, e.g. `{{stem}}Tests.cs`")
        if "/" in pattern or "\\" in pattern:
            raise _bad(path, where, f"`{pattern}` contains a path separator; give a file name "
                       "only and list test folders in tdd.testRoots")
        if not pattern.endswith(".cs"):
            raise _bad(path, where, f"`{pattern}` must name a C# file (end with .cs)")
    roots = [_relative(path, f"tdd.testRoots[{i}]", p)
             for i, p in enumerate(_strings(path, tdd, "testRoots", DEFAULT_ROOTS))]
    generated = [_relative(path, f"tdd.generated[{i}]", p)
                 for i, p in enumerate(_strings(path, tdd, "generated", ()))]
    return Rules(patterns, roots, _excludes(path, tdd.get("exclude", [])), generated)


def _strings(path: str, tdd: dict, key: str, default: tuple[str, ...]) -> list[str]:
    value = tdd.get(key, list(default))
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise _bad(path, f"tdd.{key}", "must be a list of non-empty strings")
    if key == "testPatterns" and not value:
        raise _bad(path, "tdd.testPatterns", "must name at least one pattern, e.g. "
                   "`{stem}Tests.cs`")
    return value


def _relative(path: str, where: str, value: str) -> str:
    rel = norm_rel(value)
    if rel is None:
        raise _bad(path, where, f"`{value}` must be a relative path inside the repository")
    return rel


def _excludes(path: str, value: object) -> dict[str, str]:
    if not isinstance(value, list):
        raise _bad(path, "tdd.exclude", 'must be a list of {"path": ..., "reason": ...} objects')
    out = {}
    for i, item in enumerate(value):
        where = f"tdd.exclude[{i}]"
        if not isinstance(item, dict) or set(item) != {"path", "reason"}:
            raise _bad(path, where, 'must be an object with exactly "path" and "reason"')
        raw, reason = item["path"], item["reason"]
        if not isinstance(reason, str) or not reason.strip():
            raise _bad(path, f"{where}.reason", "must say why this file needs no test")
        rel = norm_rel(raw) if isinstance(raw, str) else None
        if rel is None or not rel.endswith(".cs") or any(c in rel for c in "*?["):
            raise _bad(path, f"{where}.path", f"`{raw}` must be an exact relative path of a "
                       ".cs file (no wildcards, no folders)")
        out[rel] = reason
    return out


def norm_rel(value: str) -> str | None:
    """`value` as a normalized repository-relative POSIX path, or None if it leaves the repo."""
    rel = posixpath.normpath(value.replace("\\", "/"))
    if rel.startswith("/") or rel == "." or rel == ".." or rel.startswith("../"):
        return None
    return rel


def is_product(rel: str, rules: Rules) -> bool:
    """C# product code: a .cs file outside build outputs, packages, generated paths, exact
    excludes and test code. Program.cs and *.Designer.cs get no exemption by name (seed §7)."""
    if not rel.lower().endswith(".cs") or rel in rules.exclude:
        return False
    folders = [p.lower() for p in rel.split("/")[:-1]]
    if any(p in SKIP_DIRS for p in folders) or folders[:1] in (["packages"], ["phases"]):
        return False  # NuGet's packages/ and the delivery state phases/ hold no product code
    if _under(rel, rules.generated) or _under(rel, rules.roots):
        return False
    return not any(p in TEST_DIRS or TEST_PROJECT.fullmatch(p) for p in folders)


def _under(rel: str, prefixes: tuple[str, ...]) -> bool:
    return any(rel == p or rel.startswith(p + "/") for p in prefixes)


class Candidates:
    """Test file names found under each searched folder; each folder is walked at most once per
    call, and files written or deleted by the same call are taken into account."""

    def __init__(self, repo: str, rules: Rules, created: set[str], deleted: set[str]) -> None:
        self.repo, self.rules = repo, rules
        self.created, self.deleted = created, deleted
        self.found: dict[str, set[str]] = {}

    def under(self, folder: str) -> set[str]:
        if folder not in self.found:
            names = {rel.rsplit("/", 1)[-1] for rel in self._walk(folder)
                     if rel not in self.deleted}
            names |= {rel.rsplit("/", 1)[-1] for rel in self.created
                      if rel.startswith(folder + "/") and self._evidence(rel)}
            self.found[folder] = names
        return self.found[folder]

    def _walk(self, folder: str) -> Iterator[str]:
        top = os.path.join(self.repo, folder)
        for here, dirs, files in os.walk(top):
            base = posixpath.relpath(here.replace(os.sep, "/"), self.repo.replace(os.sep, "/"))
            dirs[:] = [d for d in dirs if d.lower() not in SKIP_DIRS
                       and not _under(f"{base}/{d}", self.rules.generated)]
            yield from (f"{base}/{f}" for f in files if f.endswith(".cs"))

    def _evidence(self, rel: str) -> bool:
        folders = [p.lower() for p in rel.split("/")[:-1]]
        return not any(p in SKIP_DIRS for p in folders) and not _under(rel, self.rules.generated)


def holds_behaviour(text: str | None) -> bool:
    """Whether C# text (a new file, or the lines a change adds) may hold logic. Only text that
    declares an interface, an enum or a record and holds nothing that runs is free of it;
    unknown text (an edit the hook cannot read) is not."""
    if text is None:
        return True
    code = ATTRIBUTES.sub("", STRINGS.sub('""', COMMENTS.sub("", text)))
    return not DECLARATION.search(code) or bool(BEHAVIOUR.search(code))


def test_folders(repo: str, folder: str, rules: Rules) -> list[str]:
    """Where a product file's tests may live: the roots (`tdd.testRoots`, default `tests/` and
    `test/`), `tests/`/`test/` beside the file, the file's own folder (flat layouts), and every
    test project
    (`X.Tests`, `X.UnitTests` …) next to the file or one of its parents."""
    where = [*rules.roots, *(posixpath.join(folder, t) for t in ("tests", "test")), folder]
    parts = folder.split("/") if folder else []
    for depth in range(len(parts), -1, -1):
        parent = "/".join(parts[:depth])
        try:
            names = sorted(os.listdir(os.path.join(repo, parent)))
        except OSError:
            continue
        where += [posixpath.join(parent, n) for n in names if n.lower() not in SKIP_DIRS
                  and TEST_PROJECT.fullmatch(n)
                  and os.path.isdir(os.path.join(repo, parent, n))]
    return list(dict.fromkeys(w for w in where if w or not folder))


def missing_tests(edited: list[str], created: set[str], deleted: set[str], repo: str,
                  rules: Rules, contents: dict[str, str | None] | None = None) -> list[str]:
    """One line per edited C# product file that has no matching test file, in edit order.
    A file whose text holds no behaviour (an interface, an enum, a positional record, member
    signatures) needs none: there is nothing in it a test could prove."""
    tests = Candidates(repo, rules, created, deleted)
    contents = contents or {}
    out = []
    for rel in dict.fromkeys(edited):
        if not is_product(rel, rules) or not holds_behaviour(contents.get(rel)):
            continue
        folder, _, name = rel.rpartition("/")
        stems = dict.fromkeys([name[:-3], name[:-3].split(".")[0]])
        names = [p.replace("{stem}", s) for s in stems for p in rules.patterns]
        where = test_folders(repo, folder, rules)
        if not any(set(names) & tests.under(f) for f in where):
            out.append(f"{rel} (looked for {' or '.join(names)} under "
                       f"{', '.join(w + '/' for w in where)})")
    return out

