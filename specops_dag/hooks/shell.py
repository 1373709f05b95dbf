"""A small POSIX-shell reader for the PreToolUse hook: quotes, `$'…'`, escapes, operators,
redirections, heredocs, `$( )`, backticks and `<( )`, turned into simple commands. It only
reads text; `walk` and `rules` decide what is dangerous. Standard library only: it runs on
every call."""

from __future__ import annotations

import re

STOP = " \t\r\n;&|()<>"
PLAIN = re.compile(r"[^ \t\r\n;&|()<>'\"\\$`]+")
DQ_PLAIN = re.compile(r'[^"\\`$]+')
REDIRECT = re.compile(r"\d*(<<<|<<-|<<|<>|<&|>&|>>|>\||&>>|&>|<|>)")
OPERATOR = re.compile(r";;|&&|\|\||\|&|[;&|()\n]")
ANSI = re.compile(r"\\x([0-9a-fA-F]{1,2})|\\([0-7]{1,3})|\\(.)", re.S)
ANSI_MAP = {"n": "\n", "t": "\t", "r": "\r", "e": "\x1b", "a": "\a"}
SUBST = re.compile(r"\$\(|`")
OUTPUT = {">", ">>", ">|", "&>", "&>>", "<>"}


class Cmd:
    """One simple command: its words (quotes removed, `$VAR` kept), redirections, the text it
    reads on stdin (heredoc or here-string) and the command piped into it."""

    __slots__ = ("words", "redirects", "stdin", "pipe_from")

    def __init__(self) -> None:
        self.words: list[str] = []
        self.redirects: list[tuple[str, str]] = []
        self.stdin: str | None = None
        self.pipe_from: Cmd | None = None


def parse(text: str) -> tuple[list[Cmd], list[str]]:
    """The simple commands of `text` in order, and the bodies of its command substitutions."""
    return _Reader(text).read()


class _Reader:
    def __init__(self, text: str) -> None:
        self.s, self.i, self.n = text, 0, len(text)
        self.subs: list[str] = []
        self.cmds: list[Cmd] = []
        self.cur = Cmd()
        self.pending: list[tuple[str, bool, bool, Cmd]] = []

    def read(self) -> tuple[list[Cmd], list[str]]:
        s = self.s
        while self.i < self.n:
            c = s[self.i]
            if c in " \t\r":
                self.i += 1
            elif c == "#":
                end = s.find("\n", self.i)
                self.i = self.n if end < 0 else end
            elif c in "<>" and s.startswith("(", self.i + 1):
                self._add_word()
            elif m := REDIRECT.match(s, self.i):
                self.i = m.end()
                self._redirect(m.group(1))
            elif m := OPERATOR.match(s, self.i):
                self.i = m.end()
                prev = self._end()
                if m.group() in ("|", "|&"):
                    self.cur.pipe_from = prev
                elif m.group() == "\n":
                    self._heredocs()
            else:
                self._add_word()
        self._end()
        return self.cmds, self.subs

    def _add_word(self) -> None:
        word = self.word()
        if word is not None:
            self.cur.words.append(word)

    def _end(self) -> Cmd | None:
        cmd = self.cur
        heredoc = any(pending[3] is cmd for pending in self.pending)
        if not (cmd.words or cmd.redirects or cmd.stdin is not None or heredoc):
            return None
        self.cmds.append(cmd)
        self.cur = Cmd()
        return cmd

    def _redirect(self, op: str) -> None:
        while self.i < self.n and self.s[self.i] in " \t":
            self.i += 1
        start = self.i
        target = self.word() or ""
        if op in ("<<", "<<-"):
            quoted = any(q in self.s[start:self.i] for q in "'\"\\")
            self.pending.append((target, op == "<<-", quoted, self.cur))
        elif op == "<<<":
            self.cur.stdin = target
        else:
            self.cur.redirects.append((op, target))

    def _heredocs(self) -> None:
        s = self.s
        for delim, strip_tabs, quoted, cmd in self.pending:
            lines = []
            while self.i < self.n:
                end = s.find("\n", self.i)
                end = self.n if end < 0 else end
                line, self.i = s[self.i:end], end + 1
                if (line.lstrip("\t") if strip_tabs else line).rstrip("\r") == delim:
                    break
                lines.append(line)
            cmd.stdin = "\n".join(lines)
            if not quoted:
                self.subs += substitutions(cmd.stdin)
        self.pending = []

    def word(self) -> str | None:
        """Read one word at `self.i`; None when nothing but a line continuation was there."""
        s, n, parts = self.s, self.n, []
        while self.i < n:
            c = s[self.i]
            if c in "<>" and not parts and s.startswith("(", self.i + 1):
                body, self.i = balanced(s, self.i + 2)
                self.subs.append(body)
                parts.append("/dev/fd/63")
            elif c in STOP:
                break
            elif c == "'":
                end = s.find("'", self.i + 1)
                end = n if end < 0 else end
                parts.append(s[self.i + 1:end])
                self.i = end + 1
            elif c == '"':
                self.i = self._dquote(parts)
            elif c == "\\":
                if s.startswith("\n", self.i + 1):
                    self.i += 2
                    continue
                parts.append(s[self.i + 1:self.i + 2])
                self.i += 2
            elif c == "$" and s.startswith("'", self.i + 1):
                end = self.i + 2
                while end < n and s[end] != "'":
                    end += 2 if s[end] == "\\" else 1
                parts.append(ANSI.sub(_ansi, s[self.i + 2:end]))
                self.i = end + 1
            elif c in "$`":
                self.i = self._substitution(parts, self.i)
            else:
                m = PLAIN.match(s, self.i)
                parts.append(m.group())
                self.i = m.end()
        return "".join(parts) if parts else None

    def _substitution(self, parts: list[str], i: int) -> int:
        s = self.s
        if s.startswith("`", i):
            end = backtick_end(s, i + 1)
            self.subs.append(s[i + 1:end])
            parts.append(s[i:end + 1])
            return end + 1
        if s.startswith("$(", i):
            body, end = balanced(s, i + 2)
            if not body.startswith("("):  # $(( )) is arithmetic
                self.subs.append(body)
        elif s.startswith("${", i):
            end = s.find("}", i)
            end = self.n if end < 0 else end + 1
        else:
            end = i + 1
        parts.append(s[i:end])
        return end

    def _dquote(self, parts: list[str]) -> int:
        s, n, i, buf = self.s, self.n, self.i + 1, []
        while i < n and s[i] != '"':
            if s[i] == "\\" and i + 1 < n and s[i + 1] in '"\\$`\n':
                buf.append("" if s[i + 1] == "\n" else s[i + 1])
                i += 2
            elif s[i] in "$`":
                i = self._substitution(buf, i)
            else:
                m = DQ_PLAIN.match(s, i)
                buf.append(m.group() if m else s[i])
                i = m.end() if m else i + 1
        parts.append("".join(buf))
        return i + 1


def _ansi(m: re.Match) -> str:
    if m.group(1):
        return chr(int(m.group(1), 16))
    if m.group(2):
        return chr(int(m.group(2), 8) % 256)
    return ANSI_MAP.get(m.group(3), m.group(3))


def balanced(s: str, i: int) -> tuple[str, int]:
    """The body of a `$(`/`(` opened just before `i` and the index after its `)`."""
    start, n, stack = i, len(s), ["("]
    while i < n:
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if stack[-1] == '"':
            if c == '"':
                stack.pop()
            elif s.startswith("$(", i):
                stack.append("(")
                i += 1
        elif c == "'":
            end = s.find("'", i + 1)
            i = n if end < 0 else end
        elif c == '"':
            stack.append('"')
        elif c == "(":
            stack.append("(")
        elif c == ")":
            stack.pop()
            if not stack:
                return s[start:i], i + 1
        i += 1
    return s[start:], n


def backtick_end(s: str, i: int) -> int:
    while True:
        end = s.find("`", i)
        if end < 0:
            return len(s)
        if s[end - 1] != "\\":
            return end
        i = end + 1


def substitutions(text: str) -> list[str]:
    """Command substitutions in text that the shell expands (an unquoted heredoc body)."""
    out, i = [], 0
    while m := SUBST.search(text, i):
        if m.start() and text[m.start() - 1] == "\\":
            i = m.end()
        elif m.group() == "`":
            end = backtick_end(text, m.end())
            out.append(text[m.end():end])
            i = end + 1
        else:
            body, i = balanced(text, m.end())
            if not body.startswith("("):
                out.append(body)
    return out
