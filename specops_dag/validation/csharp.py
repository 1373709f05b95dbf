"""A small C# scanner for test files: the test methods of one source text with their class,
attributes, assertion and skip calls, line numbers and a whitespace-insensitive body hash. Regex
and bracket matching over the text with strings and comments blanked; it is no C# parser and
reads no file.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from dataclasses import dataclass

TEST_ATTRIBUTES = frozenset({"Fact", "Theory", "Test", "TestCase", "TestCaseSource",
                             "TestMethod", "DataTestMethod"})
# A `[` where an attribute section may start: after a member, a block or another section.
SECTION_START = re.compile(r"(?:\A|(?<=[{};\]]))\s*\[")
NEXT_SECTION = re.compile(r"\s*\[")
TARGET = re.compile(r"\s*(?:assembly|module|field|event|method|param|property|return|type)"
                    r"\s*:(?!:)")
ATTRIBUTE = re.compile(r"\s*(?:global::)?(?:\w+\.)*(\w+?)(?:Attribute)?\s*(\(|\Z)")
MODIFIERS = (r"\s*(?:(?:public|private|protected|internal|static|sealed|abstract|partial|file"
             r"|unsafe|new|readonly|ref)\s+)*")
TYPE_AFTER = re.compile(MODIFIERS + r"(?:record\s+)?(?:class|struct|interface|record)\s+(@?\w+)")
TYPE_DECL = re.compile(r"\b(?:class|struct|interface|record)\s+(?!where\b|class\b|struct\b)(@?\w+)")
METHOD_AFTER = re.compile(r"\s*[^;{}=()]*?\b(@?\w+)\s*(?:<[^;{}()]*>)?\s*\(")
BODY_START = re.compile(r"[^;{=]*")
STRING_START = re.compile(r'(?:\$+@?|@\$*)?("{3,}|")')
CHAR = re.compile(r"'(?:[^'\\\n]|\\[^\n]{1,9}?)'")
STRING_VALUE = re.compile(r'@?"((?:[^"\\]|\\.)*)"')
# Calls that end a test without a verdict (a skip at run time), and one that passes it early.
SKIP_CALL = re.compile(r"\b(Assert\.(?:Inconclusive|Ignore|Skip|SkipWhen|SkipUnless)"
                       r"|Skip\.(?:If|IfNot))\s*\(")
ASSERTION = re.compile(r"\b(?:(?:Classic|Collection|String|File|Directory)?Assert\.(\w+)"
                       r"|Assert\w*|Verify\w*)\s*(?:<[^;(){}]*?>)?\s*\("
                       r"|\.Should\w*\s*\(|\.(?:Received|DidNotReceive)\w*\s*\(")
NOT_ASSERTIONS = frozenset({"Inconclusive", "Ignore", "Skip", "SkipWhen", "SkipUnless", "Pass"})
PAIRS = {"{": "}", "(": ")", "[": "]"}
NOTABLE = re.compile(r"//|/\*|[#\"'$@]")


@dataclass(frozen=True)
class Attribute:
    """One attribute as written: `args` keeps strings, `code` has them blanked (named args)."""

    name: str
    args: str
    code: str
    line: int

    def strings(self) -> list[str]:
        return STRING_VALUE.findall(self.args)


@dataclass(frozen=True)
class TestMethod:
    """A method carrying a test attribute, as found in one file."""

    __test__ = False  # not a pytest class, despite the name

    path: str
    cls: str
    name: str
    line: int
    attributes: tuple[Attribute, ...]
    class_attributes: tuple[Attribute, ...]
    assertions: int
    skip_calls: tuple[tuple[str, int], ...]
    body_hash: str

    @property
    def full_name(self) -> str:
        return f"{self.cls}.{self.name}"


def blank(text: str) -> tuple[str, str]:
    """(code, uncommented): `text` with comments, preprocessor lines and string and char
    literals blanked to spaces in `code`, only comments and preprocessor lines in
    `uncommented`. Both keep the length and every newline, so offsets and lines still hold."""
    code, uncommented = list(text), list(text)
    i, n = 0, len(text)
    while m := NOTABLE.search(text, i):
        i, c = m.start(), m.group()[0]
        if text.startswith("//", i) or (c == "#" and not text[_bol(text, i):i].strip()):
            end, both = _eol(text, i), True
        elif text.startswith("/*", i):
            close = text.find("*/", i + 2)
            end, both = (n if close < 0 else close + 2), True
        elif c in "\"'$@" and (literal := _literal_end(text, i)) is not None:
            end, both = literal, False
        else:
            i += 1
            continue
        for buf in (code, uncommented) if both else (code,):
            buf[i:end] = [ch if ch == "\n" else " " for ch in text[i:end]]
        i = end
    return "".join(code), "".join(uncommented)


def _bol(text: str, i: int) -> int:
    return text.rfind("\n", 0, i) + 1


def _eol(text: str, i: int) -> int:
    end = text.find("\n", i)
    return len(text) if end < 0 else end


def _literal_end(text: str, i: int) -> int | None:
    """Where the string or char literal starting at `i` ends (None: no literal starts here)."""
    if text[i] == "'":
        m = CHAR.match(text, i)
        return m.end() if m else i + 1
    m = STRING_START.match(text, i)
    if m is None:
        return None
    quotes, j, n = m.group(1), m.end(), len(text)
    if len(quotes) >= 3:  # a raw string literal ends at the same run of quotes
        close = text.find(quotes, j)
        return n if close < 0 else close + len(quotes)
    if "@" in text[i:m.start(1)]:  # verbatim: "" is a quote inside
        while (close := text.find('"', j)) >= 0 and text.startswith('""', close):
            j = close + 2
        return n if close < 0 else close + 1
    while j < n and text[j] not in '"\n':
        j += 2 if text[j] == "\\" else 1
    return min(j + 1, n) if j < n and text[j] == '"' else j


def matching(code: str, i: int) -> int:
    """The index of the bracket closing the one at `i` (the last index when it is unclosed)."""
    opening, closing, depth = code[i], PAIRS[code[i]], 0
    for j in range(i, len(code)):
        if code[j] == opening:
            depth += 1
        elif code[j] == closing:
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


def scan(text: str, path: str) -> list[TestMethod]:
    """Every test method of `text` (the file at `path`), in source order."""
    code, uncommented = blank(text)
    lines = [m.start() for m in re.finditer("\n", text)]

    def line(pos: int) -> int:
        return bisect.bisect_left(lines, pos) + 1

    types = _types(code)
    class_attrs: dict[int, tuple[Attribute, ...]] = {}
    found = []
    for end, attrs in _attribute_runs(text, code, line):
        if m := TYPE_AFTER.match(code, end):
            class_attrs[m.start(1)] = attrs
        elif any(a.name in TEST_ATTRIBUTES for a in attrs) and (m := METHOD_AFTER.match(code, end)):
            found.append((m, attrs))
    tests = []
    for m, attrs in found:
        start, stop = _body(code, m.end() - 1)
        owner = _owner(types, m.start(1))
        tests.append(TestMethod(
            path=path, cls=owner[1] if owner else "", name=m.group(1).lstrip("@"),
            line=line(m.start(1)), attributes=attrs,
            class_attributes=class_attrs.get(owner[0], ()) if owner else (),
            assertions=_assertions(code[start:stop]),
            skip_calls=tuple((s.group(1), line(s.start()))
                             for s in SKIP_CALL.finditer(code, start, stop)),
            body_hash=hashlib.sha1(re.sub(r"\s+", "", uncommented[start:stop]).encode()
                                   ).hexdigest()[:16]))
    return tests


def _types(code: str) -> list[tuple[int, str, int, int]]:
    """(name offset, name, body open, body close) of every type declaration with a body."""
    types = []
    for m in TYPE_DECL.finditer(code):
        k = BODY_START.match(code, m.end()).end()
        if k < len(code) and code[k] == "{":
            types.append((m.start(1), m.group(1).lstrip("@"), k, matching(code, k)))
    return types


def _owner(types: list[tuple[int, str, int, int]], pos: int) -> tuple[int, str] | None:
    """(name offset, name) of the innermost type whose body holds `pos`."""
    inside = [t for t in types if t[2] < pos < t[3]]
    if not inside:
        return None
    best = max(inside, key=lambda t: t[2])
    return best[0], best[1]


def _attribute_runs(text: str, code: str, line) -> list[tuple[int, tuple[Attribute, ...]]]:
    """(end, attributes) of every run of adjacent attribute sections in member position."""
    runs: list[tuple[int, tuple[Attribute, ...]]] = []
    pos = 0
    while m := SECTION_START.search(code, pos):
        attrs: list[Attribute] = []
        start = m.end() - 1
        while True:
            close = matching(code, start)
            attrs += _section(text, code, start, close, line)
            nxt = NEXT_SECTION.match(code, close + 1)
            if nxt is None:
                break
            start = nxt.end() - 1
        runs.append((close + 1, tuple(attrs)))
        pos = close + 1
    return runs


def _section(text: str, code: str, start: int, close: int, line) -> list[Attribute]:
    """The attributes of the section `[...]` from `start` to `close`."""
    inner = start + 1
    if target := TARGET.match(code, inner, close):
        inner = target.end()
    attrs = []
    for a, b in _split(code, inner, close):
        m = ATTRIBUTE.match(code, a, b)
        if m is None:
            continue
        args = (m.end(), matching(code, m.end() - 1)) if m.group(2) == "(" else (b, b)
        attrs.append(Attribute(m.group(1), text[args[0]:args[1]], code[args[0]:args[1]],
                               line(m.start(1))))
    return attrs


def _split(code: str, start: int, stop: int) -> list[tuple[int, int]]:
    """The comma-separated pieces of code[start:stop], commas inside brackets kept."""
    pieces, depth, a = [], 0, start
    for j in range(start, stop):
        ch = code[j]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            pieces.append((a, j))
            a = j + 1
    return [*pieces, (a, stop)]


def _body(code: str, paren: int) -> tuple[int, int]:
    """The body of the method whose parameter list opens at `paren`: a block or `=> expr;`."""
    k = BODY_START.match(code, matching(code, paren) + 1).end()
    if k >= len(code) or code[k] == ";":
        return k, k
    if code[k] == "{":
        return k, matching(code, k) + 1
    depth, j = 0, k
    while j < len(code) and not (code[j] == ";" and depth == 0):
        depth += (code[j] in "([{") - (code[j] in ")]}")
        j += 1
    return k, j


def _assertions(body: str) -> int:
    return sum(1 for m in ASSERTION.finditer(body) if m.group(1) not in NOT_ASSERTIONS)
