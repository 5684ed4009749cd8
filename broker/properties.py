"""Java `.properties` files: what Kafka users write broker and client settings in."""

from __future__ import annotations

import re


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java `.properties` syntax: comments (# !), `k=v`, `k: v`, `k v`, continuation
    lines, and escapes (\\t \\n \\r \\f \\uXXXX, backslash before any other char)."""
    out: dict[str, str] = {}
    lines = re.split(r"\r\n|\r|\n", text)
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        logical = line
        while _ends_with_continuation(logical):
            logical = logical[:-1]
            if i >= len(lines):
                break
            logical += lines[i].lstrip(" \t\f")
            i += 1
        key, value = _split_key_value(logical)
        out[_unescape(key)] = _unescape(value)
    return out


def _ends_with_continuation(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    j, escaped = 0, False
    while j < len(line):
        c = line[j]
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c in "=: \t\f":
            break
        j += 1
    key = line[:j]
    rest = line[j:].lstrip(" \t\f")
    if rest[:1] in ("=", ":") and (j >= len(line) or line[j] in " \t\f=:"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= len(s):
            break
        c = s[i]
        if c == "u":
            hexdigits = s[i + 1 : i + 5]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", hexdigits):
                raise ValueError(f"Malformed \\uxxxx encoding: \\u{hexdigits}")
            out.append(chr(int(hexdigits, 16)))
            i += 5
            continue
        out.append(_ESCAPES.get(c, c))
        i += 1
    return "".join(out)


# A JAAS login-module entry (`sasl.jaas.config`): `Module required key="value" key2=v2;`
_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


def parse_jaas_options(text: str) -> dict[str, str]:
    """The key=value options of a single JAAS login-module entry."""
    out = {}
    for m in _OPTION.finditer(text):
        value = m.group(2) if m.group(2) is not None else m.group(3)
        out[m.group(1)] = re.sub(r"\\(.)", r"\1", value)
    return out
