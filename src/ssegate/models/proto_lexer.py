"""Tokens of ``.proto`` text, each with the line and column it starts at (both from 1), and
:class:`TokenStream`, the cursor the parser (:mod:`~ssegate.models.proto_text`) reads them with.

Comments (``//`` to the end of the line, ``/* ... */``) and white space are dropped. Identifiers
keep their dots (``google.protobuf.Timestamp``, ``.pkg.Outer``) so the parser reads a type name as
one token. String literals are returned unescaped, with adjacent literals joined as in C.
A character no token starts with, an unterminated string or an unterminated comment raises
:class:`ProtoSyntaxError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

IDENT = "ident"
INT = "int"
FLOAT = "float"
STRING = "string"
SYMBOL = "symbol"
END = "end"

_TOKEN = re.compile(
    r"""
    (?P<space>[ \t\r\f\v]+)
    |(?P<newline>\n)
    |(?P<comment>//[^\n]*)
    |(?P<block>/\*)
    |(?P<float>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
    |(?P<int>0[xX][0-9a-fA-F]+|0[0-7]*|[1-9]\d*)
    |(?P<ident>\.?[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)
    |(?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
    |(?P<symbol>[{}\[\]()<>;=,:+\-])
    """,
    re.VERBOSE,
)
_ESCAPE = re.compile(
    r"\\(?:(?P<octal>[0-7]{1,3})|[xX](?P<hex>[0-9a-fA-F]{1,2})|u(?P<u4>[0-9a-fA-F]{4})"
    r"|U(?P<u8>[0-9a-fA-F]{8})|(?P<char>.))",
    re.DOTALL,
)
_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


class ProtoSyntaxError(ValueError):
    """``.proto`` text that cannot be read; the message starts with ``line L, column C:``."""

    def __init__(self, line: int, column: int, message: str) -> None:
        super().__init__(f"line {line}, column {column}: {message}")
        self.line = line
        self.column = column


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    text: str
    """The source text, or for a string literal its unescaped value."""
    line: int
    column: int

    def fail(self, message: str) -> ProtoSyntaxError:
        return ProtoSyntaxError(self.line, self.column, message)

    def describe(self) -> str:
        if self.kind == END:
            return "the end of the text"
        if self.kind == STRING:
            return f"string {self.text!r}"
        return f"'{self.text}'"


def tokenize(text: str) -> list[Token]:
    """Every token of ``text``, ending with one ``end`` token."""
    tokens: list[Token] = []
    line, line_start, pos = 1, 0, 0
    while pos < len(text):
        column = pos - line_start + 1
        found = _TOKEN.match(text, pos)
        if found is None:
            quote = text[pos] in "\"'"
            message = "unterminated string" if quote else f"unexpected character {text[pos]!r}"
            raise ProtoSyntaxError(line, column, message)
        kind = found.lastgroup
        end = found.end()
        if kind == "newline":
            line, line_start = line + 1, end
        elif kind == "block":
            close = text.find("*/", end)
            if close < 0:
                raise ProtoSyntaxError(line, column, "unterminated /* comment")
            end = close + 2
            breaks = text.count("\n", pos, end)
            if breaks:
                line, line_start = line + breaks, text.rfind("\n", pos, end) + 1
        elif kind == STRING:
            value = _unescape(found.group()[1:-1])
            previous = tokens[-1] if tokens else None
            if previous is not None and previous.kind == STRING:
                tokens[-1] = Token(STRING, previous.text + value, previous.line, previous.column)
            else:
                tokens.append(Token(STRING, value, line, column))
        elif kind not in ("space", "comment"):
            tokens.append(Token(str(kind), found.group(), line, column))
        pos = end
    tokens.append(Token(END, "", line, pos - line_start + 1))
    return tokens


def _unescape(body: str) -> str:
    return _ESCAPE.sub(_escaped, body)


def _escaped(found: re.Match[str]) -> str:
    for group, base in (("octal", 8), ("hex", 16), ("u4", 16), ("u8", 16)):
        digits = found.group(group)
        if digits is not None:
            return chr(int(digits, base))
    char = found.group("char")
    return _SIMPLE_ESCAPES.get(char, char)


class TokenStream:
    """A cursor over tokens, with the readers every part of a ``.proto`` file needs: names,
    numbers, ``option name = value``, ``reserved``/``extensions`` ranges, and skipping a
    balanced ``{...}`` block that is read but not used."""

    def __init__(self, text: str) -> None:
        self.tokens = tokenize(text)
        self.pos = 0

    def peek(self) -> Token:
        return self.tokens[self.pos]

    def next(self) -> Token:
        token = self.tokens[self.pos]
        if token.kind != END:
            self.pos += 1
        return token

    def accept(self, text: str) -> bool:
        token = self.tokens[self.pos]
        if token.text == text and token.kind not in (STRING, END):
            self.pos += 1
            return True
        return False

    def expect(self, text: str) -> Token:
        token = self.next()
        if token.text != text or token.kind in (STRING, END):
            raise token.fail(f"expected '{text}', found {token.describe()}")
        return token

    def name(self, what: str) -> Token:
        token = self.next()
        if token.kind != IDENT or "." in token.text:
            raise token.fail(f"expected {what}, found {token.describe()}")
        return token

    def integer(self, what: str) -> int:
        negative = self.accept("-")
        token = self.next()
        if token.kind != INT:
            raise token.fail(f"expected {what}, found {token.describe()}")
        value = parse_int(token.text)
        return -value if negative else value

    # -- options, ranges, skipped blocks ---------------------------------------------------------

    def option(self) -> tuple[str, Token | None]:
        """``name = value;`` after ``option``; an aggregate value ``{...}`` is ``None``."""
        key = self.option_name()
        self.expect("=")
        value = self.option_value()
        self.expect(";")
        return key, value

    def option_name(self) -> str:
        parts = []
        if self.accept("("):
            parts.append(f"({self.next().text})")
            self.expect(")")
        else:
            parts.append(self.name("an option name").text)
        while self.peek().kind == IDENT and self.peek().text.startswith("."):
            parts.append(self.next().text)
        return "".join(parts)

    def option_value(self) -> Token | None:
        if self.accept("{"):
            self.skip_to("}")
            return None
        sign = self.peek()
        negative = self.accept("-")
        value = self.next()
        if value.kind in (END, SYMBOL):
            raise value.fail(f"expected an option value, found {value.describe()}")
        if negative:
            return Token(value.kind, f"-{value.text}", sign.line, sign.column)
        return value

    def ranges(self, ranges: Any, names: Any, maximum: int, past_end: int) -> None:
        """``reserved``/``extensions``: numbers and ``a to b|max`` ranges, or quoted names. The
        stored end is exclusive for messages (``past_end`` 1) and inclusive for enums (0)."""
        if self.peek().kind == STRING and names is not None:
            while True:
                names.append(self.next().text)
                if not self.accept(","):
                    break
        else:
            while True:
                start = self.integer("a number")
                end = start
                if self.accept("to"):
                    end = maximum if self.accept("max") else self.integer("a number")
                ranges.add(start=start, end=end + past_end)
                if not self.accept(","):
                    break
        if self.accept("["):
            self.skip_to("]")
        self.expect(";")

    def skip_block(self) -> None:
        """A ``service`` or ``extend`` block: its header, then ``{...}``."""
        while not self.accept("{"):
            token = self.next()
            if token.kind == END or token.text in (";", "}"):
                raise token.fail(f"expected '{{', found {token.describe()}")
        self.skip_to("}")

    def skip_to(self, close: str) -> None:
        """Past the ``close`` that balances an opening already read."""
        pairs = {"{": "}", "[": "]", "(": ")", "<": ">"}
        stack = [close]
        while stack:
            token = self.next()
            if token.kind == END:
                raise token.fail(f"expected '{stack[-1]}', found the end of the text")
            if token.kind == STRING:
                continue
            if token.text in pairs:
                stack.append(pairs[token.text])
            elif token.text == stack[-1]:
                stack.pop()


def parse_int(text: str) -> int:
    """A protobuf integer literal: decimal, ``0x`` hexadecimal or ``0`` octal."""
    if text[:2] in ("0x", "0X"):
        return int(text, 16)
    if len(text) > 1 and text.startswith("0"):
        return int(text, 8)
    return int(text)
