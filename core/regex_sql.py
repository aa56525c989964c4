"""RE2 patterns rewritten for PostgreSQL's regular expressions (ARE), with the same meaning.

PromQL's regular expressions are RE2's; PostgreSQL's are Henry Spencer's AREs, which read some of the
same text differently or not at all (``(?i)`` inside a pattern, ``a{1,1000}`` past 255, ``(?P<x>…)``,
``\\d`` on non-ASCII digits). A user's pattern therefore never reaches PostgreSQL as written: it is
parsed here as RE2 reads it and written out as an ARE that accepts exactly the same strings, anchored
(``^(?:…)$``) and with ``.`` matching a newline, as :mod:`core.labels` matches in Python:

* literals and classes are written out character by character (``(?i)`` becomes ``[nN]``, with every
  case variant RE2 folds together); ``\\d``, ``\\w``, ``\\s`` and POSIX classes are RE2's ASCII sets;
* repetitions over 255 are split into repetitions of at most 255;
* groups lose their captures (a whole-string match does not depend on them, nor on greediness).

What has no faithful ARE (Unicode classes such as ``\\p{L}``, word boundaries, multi-line anchors,
``\\C``, octal escapes, a NUL) raises :class:`Untranslatable`; the caller then matches in Python.
:func:`to_postgres` assumes the pattern compiled with RE2 already (``core.labels.check_regex``).

Size: one translation (RE2 read, an ARE of the same meaning written) over one set of node types; the
parser is most of it and has no use apart from the writer.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from core.labels import compile_regex

MAX_CODE_POINT = 0x10FFFF
# PostgreSQL's largest repetition count (DUPMAX).
ARE_MAX_REPEAT = 255
# A case-insensitive class larger than this is not written out (see _fold_ranges).
MAX_FOLDED_CLASS = 5000
# PostgreSQL refuses a pattern whose automaton grows too large ("regular expression is too complex"):
# (a{1000}){20} is refused, (a{2,1000}b{1,1000}){5} compiles. A pattern whose characters, each
# repetition counted out, exceed this is left to Python.
MAX_EXPANDED_SIZE = 4000
# A class no character of PostgreSQL's text is in (only a NUL is outside it, and text holds none).
_NOTHING = f"[^{chr(1)}-{chr(MAX_CODE_POINT)}]"
_ARE_SPECIAL = set("\\^$.[]|()*+?{}")
_CLASS_SPECIAL = set("\\]-[^")
_SIMPLE_ESCAPES = {"a": 7, "f": 12, "t": 9, "n": 10, "r": 13, "v": 11}
_ASCII = {
    "alnum": [(48, 57), (65, 90), (97, 122)],
    "alpha": [(65, 90), (97, 122)],
    "ascii": [(0, 127)],
    "blank": [(9, 9), (32, 32)],
    "cntrl": [(0, 31), (127, 127)],
    "digit": [(48, 57)],
    "graph": [(33, 126)],
    "lower": [(97, 122)],
    "print": [(32, 126)],
    "punct": [(33, 47), (58, 64), (91, 96), (123, 126)],
    "space": [(9, 13), (32, 32)],
    "upper": [(65, 90)],
    "word": [(48, 57), (65, 90), (95, 95), (97, 122)],
    "xdigit": [(48, 57), (65, 70), (97, 102)],
}
_PERL = {"d": _ASCII["digit"], "w": _ASCII["word"], "s": [(9, 10), (12, 13), (32, 32)]}


class Untranslatable(ValueError):
    """A pattern (or a part of it) with no ARE of the same meaning."""


# -- the tree -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Chars:
    """One character out of a set of code point ranges (``negated``: any character outside them)."""

    ranges: tuple[tuple[int, int], ...]
    negated: bool = False


@dataclass(frozen=True)
class Anchor:
    start: bool


@dataclass(frozen=True)
class Repeat:
    node: object
    least: int
    most: int | None


@dataclass(frozen=True)
class Concat:
    parts: tuple


@dataclass(frozen=True)
class Alternate:
    options: tuple


@dataclass
class _Flags:
    fold: bool = False
    dot_nl: bool = True
    multi_line: bool = False

    def copy(self) -> _Flags:
        return _Flags(self.fold, self.dot_nl, self.multi_line)


# -- case folding as RE2 does it ------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _case_groups() -> dict[int, tuple[int, ...]]:
    """Candidates for each cased code point's case variants (checked against RE2 in :func:`_folds`)."""
    groups: dict[str, set[int]] = {}
    for code in range(0x1E950):  # no cased letter lies above the Adlam block
        char = chr(code)
        lower, upper = char.lower(), char.upper()
        if lower == char and upper == char:
            continue
        for key in (lower, upper, upper.lower() if len(upper) == 1 else lower):
            if len(key) == 1:
                groups.setdefault(key, set()).add(code)
    found: dict[int, set[int]] = {}
    for members in groups.values():
        for code in members:
            found.setdefault(code, set()).update(members)
            for other in members:
                found.setdefault(other, set()).add(code)
    return {code: tuple(sorted(members)) for code, members in found.items()}


@lru_cache(maxsize=4096)
def _folds(code: int) -> tuple[int, ...]:
    """The code points RE2's ``(?i)`` treats as ``code`` (itself included)."""
    candidates = _case_groups().get(code)
    if not candidates:
        return (code,)
    pattern = compile_regex("(?i)" + _re2_literal(code))
    return tuple(sorted({code} | {c for c in candidates if pattern.fullmatch(chr(c))}))


def _re2_literal(code: int) -> str:
    return f"\\x{{{code:X}}}"


def _fold_ranges(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    if sum(hi - lo + 1 for lo, hi in ranges) > MAX_FOLDED_CLASS:
        raise Untranslatable("a case-insensitive class this large")
    codes = {c for lo, hi in ranges for code in range(lo, hi + 1) for c in _folds(code)}
    return _to_ranges(codes)


def _to_ranges(codes: set[int]) -> tuple[tuple[int, int], ...]:
    ranges: list[list[int]] = []
    for code in sorted(codes):
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    return tuple((lo, hi) for lo, hi in ranges)


def _merge(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return tuple((lo, hi) for lo, hi in merged)


def _complement(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    found, start = [], 0
    for lo, hi in ranges:
        if lo > start:
            found.append((start, lo - 1))
        start = hi + 1
    if start <= MAX_CODE_POINT:
        found.append((start, MAX_CODE_POINT))
    return tuple(found)


# -- parsing RE2's syntax -------------------------------------------------------------------------------
class _Parser:
    def __init__(self, pattern: str):
        self.text = pattern
        self.at = 0

    def peek(self, ahead: int = 0) -> str:
        index = self.at + ahead
        return self.text[index] if index < len(self.text) else ""

    def take(self) -> str:
        char = self.peek()
        if not char:
            raise Untranslatable("unexpected end of pattern")
        self.at += 1
        return char

    def parse(self) -> object:
        node = self.alternation(_Flags())
        if self.at != len(self.text):
            raise Untranslatable(f"unexpected {self.peek()!r}")
        return node

    def alternation(self, flags: _Flags) -> object:
        options = [self.concatenation(flags)]
        while self.peek() == "|":
            self.at += 1
            options.append(self.concatenation(flags))
        return options[0] if len(options) == 1 else Alternate(tuple(options))

    def concatenation(self, flags: _Flags) -> object:
        parts: list = []
        while self.peek() and self.peek() not in "|)":
            if self.text.startswith("(?", self.at) and self._flag_group(flags):
                continue
            atom = self.atom(flags)
            if atom is None:
                continue
            if isinstance(atom, list):  # \Q...\E: literals, a repetition after it repeats the last one
                parts.extend(atom[:-1])
                atom = atom[-1] if atom else None
                if atom is None:
                    continue
            parts.append(self.quantified(atom))
        return parts[0] if len(parts) == 1 else Concat(tuple(parts))

    def _flag_group(self, flags: _Flags) -> bool:
        """``(?i)``-style flags for the rest of the enclosing group; False for any other ``(?``."""
        end = self.text.find(")", self.at)
        body = self.text[self.at + 2 : end] if end > 0 else ""
        if not body or any(c not in "imsU-" for c in body):
            return False
        self._set_flags(flags, body)
        self.at = end + 1
        return True

    @staticmethod
    def _set_flags(flags: _Flags, body: str) -> None:
        on = True
        for char in body:
            if char == "-":
                on = False
            elif char == "i":
                flags.fold = on
            elif char == "s":
                flags.dot_nl = on
            elif char == "m":
                flags.multi_line = on
            # U (ungreedy) changes which match is found, never whether the whole text matches

    def quantified(self, atom: object) -> object:
        while True:
            char = self.peek()
            if char in ("*", "+", "?"):
                self.at += 1
                atom = Repeat(atom, 0 if char != "+" else 1, None if char != "?" else 1)
            elif char == "{" and (bounds := self._bounds()) is not None:
                atom = Repeat(atom, *bounds)
            else:
                return atom
            if self.peek() == "?":
                self.at += 1  # lazy: the same strings match the whole text

    def _bounds(self) -> tuple[int, int | None] | None:
        end = self.text.find("}", self.at)
        if end < 0:
            return None
        body = self.text[self.at + 1 : end]
        least, comma, most = body.partition(",")
        if not least.isdigit() or (most and not most.isdigit()):
            return None  # RE2 reads a "{" that starts no repetition as a literal
        self.at = end + 1
        if not comma:
            return int(least), int(least)
        return int(least), (int(most) if most else None)

    def atom(self, flags: _Flags):
        char = self.take()
        if char == "(":
            return self.group(flags)
        if char == ".":
            return Chars(((10, 10),), negated=True) if not flags.dot_nl else Chars(((0, MAX_CODE_POINT),))
        if char in "^$":
            if flags.multi_line:
                raise Untranslatable("multi-line anchors")
            return Anchor(start=char == "^")
        if char == "[":
            return self.char_class(flags)
        if char == "\\":
            return self.escape(flags)
        return self.literal(ord(char), flags)

    @staticmethod
    def literal(code: int, flags: _Flags) -> Chars:
        if flags.fold:
            return Chars(_to_ranges(set(_folds(code))))
        return Chars(((code, code),))

    def group(self, flags: _Flags) -> object:
        inner = flags.copy()
        if self.peek() == "?":
            self.at += 1
            if self.peek() == "P" or (self.peek() == "<" and self.peek(1) not in "=!"):
                end = self.text.find(">", self.at)
                if end < 0:
                    raise Untranslatable("unterminated group name")
                self.at = end + 1
            elif self.peek() == ":":
                self.at += 1
            else:
                end = self.text.find(":", self.at)
                body = self.text[self.at : end] if end > 0 else ""
                if not body or any(c not in "imsU-" for c in body):
                    raise Untranslatable("an unknown group")
                self._set_flags(inner, body)
                self.at = end + 1
        node = self.alternation(inner)
        if self.take() != ")":
            raise Untranslatable("unbalanced parenthesis")
        return node

    def escape(self, flags: _Flags):
        char = self.take()
        if char.lower() in _PERL:
            # RE2 folds the class and then negates it: (?i)\W leaves out the Kelvin sign, as \w holds k
            ranges = _merge(list(_PERL[char.lower()]))
            return Chars(_fold_ranges(ranges) if flags.fold else ranges, negated=char.isupper())
        if char == "A":
            return Anchor(start=True)
        if char == "z":
            return Anchor(start=False)
        if char == "Q":
            end = self.text.find("\\E", self.at)
            quoted = self.text[self.at : end if end >= 0 else len(self.text)]
            self.at = end + 2 if end >= 0 else len(self.text)
            return [self.literal(ord(c), flags) for c in quoted]
        if char == "E":
            return None  # a stray \E ends nothing
        return self.literal(self.escaped_code(char), flags)

    def escaped_code(self, char: str) -> int:
        """The code point of a character escape (after the backslash)."""
        if char in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[char]
        if char == "x":
            if self.peek() == "{":
                end = self.text.find("}", self.at)
                digits = self.text[self.at + 1 : end]
                self.at = end + 1
            else:
                digits = self.text[self.at : self.at + 2]
                self.at += 2
            code = int(digits, 16)
            if code == 0 or 0xD800 <= code <= 0xDFFF:
                raise Untranslatable("NUL or a surrogate")
            return code
        if char.isalnum() or char == "_":
            raise Untranslatable(f"the escape \\{char}")
        return ord(char)

    def char_class(self, flags: _Flags) -> Chars:
        negated = self.peek() == "^"
        if negated:
            self.at += 1
        ranges: list[tuple[int, int]] = []
        first = True
        while first or self.peek() != "]":
            first = False
            if self.text.startswith("[:", self.at):
                ranges.extend(self._posix_class())
                continue
            lo, class_ranges = self._class_item()
            if class_ranges is not None:
                ranges.extend(class_ranges)
                continue
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.at += 1
                hi, hi_ranges = self._class_item()
                if hi_ranges is not None:
                    raise Untranslatable("a range ending in a class")
                ranges.append((lo, hi))
            else:
                ranges.append((lo, lo))
        self.at += 1
        merged = _merge(ranges)
        if flags.fold:
            merged = _fold_ranges(merged)
        return Chars(merged, negated=negated)

    def _posix_class(self) -> list[tuple[int, int]]:
        end = self.text.find(":]", self.at + 2)
        name = self.text[self.at + 2 : end]
        self.at = end + 2
        negate = name.startswith("^")
        ranges = _ASCII.get(name.lstrip("^"))
        if ranges is None:
            raise Untranslatable(f"the class [:{name}:]")
        return list(_complement(_merge(ranges))) if negate else list(ranges)

    def _class_item(self) -> tuple[int, list[tuple[int, int]] | None]:
        """One character of a class (its code point), or a class inside it (its ranges)."""
        char = self.take()
        if char != "\\":
            return ord(char), None
        char = self.take()
        if char.lower() in _PERL:
            ranges = _merge(list(_PERL[char.lower()]))
            return 0, list(_complement(ranges) if char.isupper() else ranges)
        if char == "Q":
            raise Untranslatable("\\Q inside a class")
        return self.escaped_code(char), None


# -- writing an ARE -------------------------------------------------------------------------------------
def _class_char(code: int) -> str:
    char = chr(code)
    return "\\" + char if char in _CLASS_SPECIAL else char


def _write_chars(node: Chars) -> str:
    ranges, negated = node.ranges, node.negated
    if ranges and ranges[0][0] == 0:  # PostgreSQL's text never holds a NUL: a class may start at 1
        ranges = ((1, ranges[0][1]), *ranges[1:]) if ranges[0][1] >= 1 else ranges[1:]
    if not ranges:
        return "." if negated else _NOTHING
    if not negated and ranges == ((1, MAX_CODE_POINT),):
        return "."  # outside newline-sensitive mode an ARE's "." is any character, newline included
    if not negated and len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        char = chr(ranges[0][0])
        return "\\" + char if char in _ARE_SPECIAL else char
    for lo, hi in ranges:
        if 0xD800 <= lo <= 0xDFFF or 0xD800 <= hi <= 0xDFFF:
            raise Untranslatable("a class bounded by a surrogate")
    body = "".join(
        _class_char(lo) if lo == hi else f"{_class_char(lo)}-{_class_char(hi)}" for lo, hi in ranges
    )
    return f"[{'^' if negated else ''}{body}]"


def _has_anchor(node: object) -> bool:
    if isinstance(node, Anchor):
        return True
    if isinstance(node, Repeat):
        return _has_anchor(node.node)
    children = node.parts if isinstance(node, Concat) else node.options if isinstance(node, Alternate) else ()
    return any(_has_anchor(child) for child in children)


def _write_repeat(node: Repeat) -> str:
    if _has_anchor(node.node):
        raise Untranslatable("an anchor inside a repetition")  # PostgreSQL's automaton explodes
    inner = f"(?:{_write(node.node)})"
    least, most = node.least, node.most
    if most is None and least <= 1:
        return inner + ("*" if least == 0 else "+")
    parts = []
    for chunk in _chunks(least):
        parts.append(f"{inner}{{{chunk}}}")
    if most is None:
        parts.append(inner + "*")
    else:
        for chunk in _chunks(most - least):
            parts.append(f"{inner}{{0,{chunk}}}")
    return "".join(parts) or "(?:)"


def _chunks(count: int) -> list[int]:
    full, rest = divmod(count, ARE_MAX_REPEAT)
    return [ARE_MAX_REPEAT] * full + ([rest] if rest else [])


def _write(node: object) -> str:
    if isinstance(node, Chars):
        return _write_chars(node)
    if isinstance(node, Anchor):
        return "^" if node.start else "$"
    if isinstance(node, Repeat):
        return _write_repeat(node)
    if isinstance(node, Concat):
        return "".join(_write(part) for part in node.parts) or "(?:)"
    if isinstance(node, Alternate):
        return "(?:" + "|".join(_write(option) or "(?:)" for option in node.options) + ")"
    raise Untranslatable(f"no ARE for {node!r}")


def _expanded_size(node: object) -> int:
    """How many characters ``node`` stands for with every repetition written out."""
    if isinstance(node, Repeat):
        count = node.most if node.most is not None else node.least + 1
        return _expanded_size(node.node) * max(count, 1)
    if isinstance(node, Concat):
        return sum(_expanded_size(part) for part in node.parts)
    if isinstance(node, Alternate):
        return sum(_expanded_size(option) for option in node.options)
    return 1


@lru_cache(maxsize=1024)
def to_postgres(pattern: str) -> str:
    """The anchored ARE that accepts exactly the strings the RE2 ``pattern`` matches whole (``.``
    matching a newline). Raises :class:`Untranslatable`."""
    tree = _Parser(pattern).parse()
    if _expanded_size(tree) > MAX_EXPANDED_SIZE:
        raise Untranslatable(f"more than {MAX_EXPANDED_SIZE} characters with its repetitions written out")
    return f"^(?:{_write(tree) or '(?:)'})$"
