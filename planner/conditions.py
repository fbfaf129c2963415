r"""World-state conditions on lore entries: a tiny expression language, never run as Python.

A lore entry may carry a condition (``hp < 10``, ``'met_marla' in flags``,
``affinity.marla >= 50 and not ('cursed' in flags)``); the entry is only eligible
while its condition holds. The text is read by a tokenizer and a recursive-descent
parser written here; nothing is handed to ``eval``, ``exec``, ``compile`` or
``ast``, and evaluating a condition only reads mappings with ``.get`` (no attribute
access, no calls but the built-in ``len``).

Grammar (EBNF; keywords are case-sensitive; whitespace between tokens is free)::

    condition  = or_expr END
    or_expr    = and_expr { ("or" | "||") and_expr }
    and_expr   = not_expr { ("and" | "&&") not_expr }
    not_expr   = ("not" | "!") not_expr | comparison
    comparison = operand { comp_op operand }            (chains: 0 < hp <= 10)
    comp_op    = "==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not" "in"
    operand    = literal | list | "len" "(" or_expr ")" | path | "(" or_expr ")"
    list       = "[" [ literal { "," literal } [ "," ] ] "]"
    path       = NAME { "[" STRING "]" }                (hp, affinity.marla, npc["Old Tom"])
               | "state" "[" STRING "]" { "[" STRING "]" }   (state["odd name"])
    literal    = NUMBER | STRING | "true" | "false" | "True" | "False" | "null" | "None"
    NAME       = SEGMENT { "." KEY }, with no spaces around the dots
    SEGMENT    = (letter | "_") { letter | digit | "_" | "-" }   (as variable names: max-hp)
    KEY        = (letter | digit | "_" | "-") { letter | digit | "_" | "-" }
    NUMBER     = [ "-" ] digits [ "." digits ] [ ("e" | "E") [ "+" | "-" ] digits ]
    STRING     = '...' | "..." ; escapes \\ \' \" \n \t

``!`` is a synonym of ``not`` with the same (Python) precedence, below the
comparisons: ``!a == b`` is ``not (a == b)``. There is no arithmetic, so ``-`` is
part of a name (``max-hp``) or of a negative number (``-5``). Names may not start
with ``__``; Python keywords other than the ones above (``is``, ``lambda``,
``import``...) are refused; ``len`` is the only function (``len`` not followed
by ``(`` is an ordinary name). A condition is at most
:data:`MAX_LENGTH` characters, nested at most :data:`MAX_DEPTH` deep (parentheses,
``not``, ``len``, list brackets), so hostile text cannot exhaust the stack.

Evaluation (a condition never raises while it is evaluated):

- The state is either a stored world state (``{"variables": {...},
  "active_lore_ids": [...], "summary": ...}``: names are its variables, plus the
  two built-ins) or a flat mapping of variables (``{"hp": 90, ...}``). A dotted
  path reads map entries (``affinity.marla``); a path through something that is
  not a map is missing.
- A missing name is ``null``. ``==`` and ``!=`` compare JSON values (``1 == 1.0``;
  a bool is not a number: ``true == 1`` is false; ``missing == null`` is true) and
  ``!=`` is always the negation of ``==``. Ordering (``< <= > >=``) is defined
  between two numbers or two strings; anything else (``null``, ``'a' < 3``) is a
  type mismatch and the comparison is false, whatever its operator.
- ``x in c``: an element of a list (by ``==``), a key of a map, a substring of a
  string. A missing/``null`` container is empty (``'cursed' not in flags`` holds
  when ``flags`` was never set). Looking for a non-string in a map or a string,
  or looking inside a number or a bool, is a mismatch: both ``in`` and ``not in``
  are false.
- ``len(x)``: the length of a string, list or map; ``len`` of a missing/``null``
  value is 0; of a number or bool it is ``null`` (so comparisons with it are false).
- ``and``, ``or``, ``not`` and a bare operand (``met_marla``) use JSON truthiness:
  ``false``, ``null``, ``0``, ``""``, ``[]`` and ``{}`` are false. ``and`` and
  ``or`` short-circuit and yield booleans.

:meth:`Condition.explain` says why: ``hp < 10 is false (hp = 42)``,
``'a' < 3 is false (cannot compare str with int)``,
``gold >= 5 and not 'cursed' in flags is false: gold >= 5 is false (gold = 2)``.
"""

from __future__ import annotations

import functools
import json
import keyword
import operator
import re
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, NoReturn

from .errors import ConditionError

__all__ = ["MAX_DEPTH", "MAX_LENGTH", "Condition", "ConditionError", "parse_condition"]

#: The longest condition text accepted, in characters.
MAX_LENGTH = 500
#: How deeply parentheses, ``not``, ``len(...)`` and list brackets may nest.
MAX_DEPTH = 32
#: How many parsed conditions are kept (keyed by their text).
CACHE_SIZE = 4096

_BUILT_INS = ("active_lore_ids", "summary")
_MISSING: Any = object()

# --- tokens --------------------------------------------------------------------------

_SPACE = re.compile(r"\s+")
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*")
_SYMBOLS = ("==", "!=", "<=", ">=", "&&", "||", "<", ">", "!", "(", ")", "[", "]", ",")
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t"}
_LITERAL_WORDS: dict[str, Any] = {
    "true": True,
    "True": True,
    "false": False,
    "False": False,
    "null": None,
    "None": None,
}
_WORDS = frozenset({"and", "or", "not", "in", *_LITERAL_WORDS})
_RESERVED = frozenset(keyword.kwlist) - _WORDS
_HINTS = {
    "=": "use == to compare",
    "&": "use 'and' or '&&'",
    "|": "use 'or' or '||'",
    "is": "use == or !=",
    "===": "use ==",
    "!==": "use !=",
}


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str
    """``num``, ``str``, ``name``, ``word`` (a keyword), ``op`` or ``end``."""
    text: str
    pos: int
    value: Any = None
    """The number or string; for a name, its segments."""


def _describe(token: _Token) -> str:
    if token.kind == "end":
        return "end of condition"
    text = token.text if len(token.text) <= 24 else token.text[:21] + "..."
    return repr(text)


def _shown(text: str) -> str:
    """The text as an error message quotes it: on one line, cut if it is very long."""
    flat = "".join(c if c.isprintable() else " " for c in text)
    return flat if len(flat) <= MAX_LENGTH else flat[:60] + "..."


# --- the tree ------------------------------------------------------------------------


def _word(value: bool) -> str:
    return "true" if value else "false"


class _Scope:
    """Reads paths from a state, whichever of the two shapes it has."""

    __slots__ = ("builtins", "variables")

    def __init__(self, state: Any) -> None:
        self.builtins: Mapping[str, Any] | None = None
        self.variables: Mapping[str, Any]
        if not isinstance(state, Mapping):
            self.variables = {}
            return
        variables = state.get("variables")
        if isinstance(variables, Mapping) and "active_lore_ids" in state:
            self.variables, self.builtins = variables, state
        else:
            self.variables = state

    def lookup(self, parts: tuple[str, ...]) -> Any:
        first = parts[0]
        if self.builtins is not None and first in _BUILT_INS:
            value = self.builtins.get(first, _MISSING)
        else:
            value = self.variables.get(first, _MISSING)
        for key in parts[1:]:
            if not isinstance(value, Mapping):
                return _MISSING
            value = value.get(key, _MISSING)
        return value


class _Node:
    """A node of a parsed condition."""

    __slots__ = ()
    #: Binding strength when rendered: or 1, and 2, not 3, comparisons and operands 4.
    level = 4
    #: Whether the node yields a boolean (a comparison, ``not``, ``and``/``or``).
    boolean = False

    def render(self) -> str:  # pragma: no cover - every node overrides it
        raise NotImplementedError

    def value(self, scope: _Scope, why: bool) -> tuple[Any, list[str]]:
        """The node's value and, when ``why``, the facts that explain it."""
        return self.truth(scope, why)

    def truth(self, scope: _Scope, why: bool) -> tuple[bool, list[str]]:
        """The node as a boolean and, when ``why``, the atoms that decided it."""
        value, facts = self.value(scope, why)
        result = _truthy(value)
        if not why:
            return result, []
        return result, [_leaf(self.render(), result, facts)]

    def paths(self) -> list[tuple[str, ...]]:
        return []


def _leaf(rendered: str, result: bool, facts: list[str]) -> str:
    unique = list(dict.fromkeys(facts))
    return f"{rendered} is {_word(result)}" + (f" ({'; '.join(unique)})" if unique else "")


@dataclass(frozen=True, slots=True)
class _Literal(_Node):
    data: Any
    text: str

    def render(self) -> str:
        return self.text

    def value(self, scope: _Scope, why: bool) -> tuple[Any, list[str]]:
        return self.data, []


@dataclass(frozen=True, slots=True)
class _List(_Node):
    items: tuple[Any, ...]
    texts: tuple[str, ...]

    def render(self) -> str:
        return "[" + ", ".join(self.texts) + "]"

    def value(self, scope: _Scope, why: bool) -> tuple[Any, list[str]]:
        return list(self.items), []


@dataclass(frozen=True, slots=True)
class _Path(_Node):
    parts: tuple[str, ...]
    text: str

    def render(self) -> str:
        return self.text

    def value(self, scope: _Scope, why: bool) -> tuple[Any, list[str]]:
        found = scope.lookup(self.parts)
        if found is _MISSING:
            return None, [f"{self.text} is missing"] if why else []
        return found, [f"{self.text} = {_show(found)}"] if why else []

    def paths(self) -> list[tuple[str, ...]]:
        return [self.parts]


@dataclass(frozen=True, slots=True)
class _Len(_Node):
    arg: _Node

    def render(self) -> str:
        return f"len({self.arg.render()})"

    def value(self, scope: _Scope, why: bool) -> tuple[Any, list[str]]:
        data, facts = self.arg.value(scope, why)
        kind = _kind(data)
        if kind == "null":
            size: int | None = 0
        elif kind in ("str", "list", "map"):
            size = len(data)
        else:
            size = None
        if not why:
            return size, []
        if size is None:
            return None, [*facts, f"len() of {_a(kind)}"]
        return size, [*(facts if kind == "null" else []), f"{self.render()} = {size}"]

    def paths(self) -> list[tuple[str, ...]]:
        return self.arg.paths()


@dataclass(frozen=True, slots=True)
class _Compare(_Node):
    operands: tuple[_Node, ...]
    ops: tuple[str, ...]
    boolean = True

    def render(self) -> str:
        pieces = [_operand_text(self.operands[0])]
        for op, node in zip(self.ops, self.operands[1:], strict=True):
            pieces += [op, _operand_text(node)]
        return " ".join(pieces)

    def truth(self, scope: _Scope, why: bool) -> tuple[bool, list[str]]:
        left_node = self.operands[0]
        left, facts = left_node.value(scope, why)
        result = True
        notes: list[str] = []
        for op, right_node in zip(self.ops, self.operands[1:], strict=True):
            right, more = right_node.value(scope, why)
            facts += more
            outcome = _OPERATORS[op](left, right)
            if why:
                note = _note(op, left, left_node, right, right_node, outcome)
                if note:
                    notes.append(note)
            if not outcome:
                result = False
                break
            left, left_node = right, right_node
        if not why:
            return result, []
        return result, [_leaf(self.render(), result, facts + notes)]

    def paths(self) -> list[tuple[str, ...]]:
        return [p for node in self.operands for p in node.paths()]


@dataclass(frozen=True, slots=True)
class _Not(_Node):
    child: _Node
    level = 3
    boolean = True

    def render(self) -> str:
        return "not " + _wrapped(self.child, self.level)

    def truth(self, scope: _Scope, why: bool) -> tuple[bool, list[str]]:
        result, leaves = self.child.truth(scope, why)
        return not result, leaves

    def paths(self) -> list[tuple[str, ...]]:
        return self.child.paths()


@dataclass(frozen=True, slots=True)
class _Logic(_Node):
    op: str
    children: tuple[_Node, ...]
    boolean = True

    @property
    def level(self) -> int:  # type: ignore[override]
        return 1 if self.op == "or" else 2

    def render(self) -> str:
        return f" {self.op} ".join(_wrapped(child, self.level) for child in self.children)

    def truth(self, scope: _Scope, why: bool) -> tuple[bool, list[str]]:
        # "and" stops at the first false child, "or" at the first true one; the
        # child that decided is the reason, else all of them are.
        decisive = self.op == "or"
        collected: list[str] = []
        for child in self.children:
            result, leaves = child.truth(scope, why)
            if result is decisive:
                return decisive, leaves
            collected += leaves
        return not decisive, collected

    def paths(self) -> list[tuple[str, ...]]:
        return [p for child in self.children for p in child.paths()]


def _wrapped(node: _Node, level: int) -> str:
    text = node.render()
    return f"({text})" if node.level < level else text


def _operand_text(node: _Node) -> str:
    # A boolean operand was parenthesised; without the parentheses, "(a < b) == c"
    # would read as the chain "a < b == c".
    return f"({node.render()})" if node.boolean else node.render()


# --- values --------------------------------------------------------------------------


def _kind(value: Any) -> str:
    """The JSON type of a value (sets and tuples count as lists)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, (list, tuple, AbstractSet)):
        return "list"
    if isinstance(value, Mapping):
        return "map"
    return type(value).__name__


_NUMBERS = ("int", "float")
_EQUAL_DEPTH = 64


def _a(kind: str) -> str:
    return ("an " if kind[:1] in ("a", "e", "i", "o", "u") else "a ") + kind


def _truthy(value: Any) -> bool:
    kind = _kind(value)
    if kind == "null":
        return False
    if kind in ("bool", "int", "float"):
        return bool(value)
    if kind in ("str", "list", "map"):
        return len(value) > 0
    return True


def _equal(a: Any, b: Any, depth: int = 0) -> bool:
    """JSON equality: numbers by value, a bool is not a number, lists in order."""
    ka, kb = _kind(a), _kind(b)
    if ka in _NUMBERS and kb in _NUMBERS:
        return bool(a == b)
    if ka != kb or depth > _EQUAL_DEPTH:
        return False
    if ka == "null":
        return True
    if ka in ("bool", "str"):
        return bool(a == b)
    if ka == "list":
        if len(a) != len(b):
            return False
        if isinstance(a, AbstractSet) or isinstance(b, AbstractSet):
            return all(any(_equal(x, y, depth + 1) for y in b) for x in a)
        return all(_equal(x, y, depth + 1) for x, y in zip(a, b, strict=True))
    if ka == "map":
        if len(a) != len(b):
            return False
        return all(key in b and _equal(a[key], b[key], depth + 1) for key in a)
    return a is b


def _ordered(compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool | None]:
    def apply(a: Any, b: Any) -> bool | None:
        ka, kb = _kind(a), _kind(b)
        if (ka in _NUMBERS and kb in _NUMBERS) or ka == kb == "str":
            return bool(compare(a, b))
        return None

    return apply


def _contains(item: Any, container: Any) -> bool | None:
    """``item in container``; ``None`` when the types do not allow the question."""
    kind = _kind(container)
    if kind == "null":
        return False
    if kind == "list":
        return any(_equal(item, element) for element in container)
    if kind in ("map", "str"):
        return item in container if isinstance(item, str) else None
    return None


def _not_contains(item: Any, container: Any) -> bool | None:
    found = _contains(item, container)
    return None if found is None else not found


_OPERATORS: dict[str, Callable[[Any, Any], bool | None]] = {
    "==": _equal,
    "!=": lambda a, b: not _equal(a, b),
    "<": _ordered(operator.lt),
    "<=": _ordered(operator.le),
    ">": _ordered(operator.gt),
    ">=": _ordered(operator.ge),
    "in": _contains,
    "not in": _not_contains,
}


def _note(
    op: str, left: Any, left_node: _Node, right: Any, right_node: _Node, outcome: bool | None
) -> str | None:
    """What an explanation adds about the operands' types, if anything."""
    kl, kr = _kind(left), _kind(right)
    if op in ("==", "!="):
        if kl != kr and not (kl in _NUMBERS and kr in _NUMBERS) and "null" not in (kl, kr):
            return f"{_a(kl)} never equals {_a(kr)}"
        return None
    if outcome is not None:
        return None
    # A null read from a path (or a len() that failed) is already explained by its fact.
    if (kl == "null" and not isinstance(left_node, _Literal)) or (
        kr == "null" and not isinstance(right_node, _Literal)
    ):
        return None
    if op in ("in", "not in"):
        if kr in ("map", "str"):
            where = "a map's keys" if kr == "map" else "a str"
            return f"cannot look for {_a(kl)} in {where}"
        return f"cannot look inside {_a(kr)}"
    return f"cannot compare {kl} with {kr}"


def _show(value: Any, limit: int = 60) -> str:
    """A short JSON-like rendering of a value, for explanations."""
    text = _render(value, 2, limit + 1)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _render(value: Any, depth: int, budget: int) -> str:
    kind = _kind(value)
    if kind == "null":
        return "null"
    if kind == "bool":
        return _word(value)
    if kind == "int":
        return str(value) if value.bit_length() <= 128 else f"<int of {value.bit_length()} bits>"
    if kind == "float":
        return repr(value)
    if kind == "str":
        return json.dumps(value[:budget], ensure_ascii=False)
    if kind not in ("list", "map"):
        return f"<{kind}>"
    if depth <= 0:
        return "[...]" if kind == "list" else "{...}"
    parts: list[str] = []
    used = 0
    items = value.items() if kind == "map" else value
    for item in items:
        if used > budget:
            parts.append("...")
            break
        if kind == "map":
            key, entry = item
            piece = f"{_render(key, 0, budget)}: {_render(entry, depth - 1, budget)}"
        else:
            piece = _render(item, depth - 1, budget)
        parts.append(piece)
        used += len(piece) + 2
    inner = ", ".join(parts)
    return f"[{inner}]" if kind == "list" else f"{{{inner}}}"


# --- the parser ----------------------------------------------------------------------


class _Parser:
    """Recursive descent over tokens read one at a time (errors come in text order)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0
        self.token = self._lex()

    # errors

    def fail(self, what: str, pos: int, hint: str = "") -> NoReturn:
        message = f"{_shown(self.text)}: {what} at column {pos + 1}"
        raise ConditionError(message + (f" ({hint})" if hint else ""))

    def unexpected(self, token: _Token, hint: str = "") -> NoReturn:
        self.fail(f"unexpected {_describe(token)}", token.pos, hint or _HINTS.get(token.text, ""))

    # tokens

    def _lex(self) -> _Token:
        text = self.text
        space = _SPACE.match(text, self.pos)
        pos = space.end() if space else self.pos
        if pos >= len(text):
            self.pos = pos
            return _Token("end", "", pos)
        char = text[pos]
        if char in ("'", '"'):
            return self._string(pos)
        number = _NUMBER.match(text, pos)
        if number:
            end = number.end()
            if end < len(text) and (text[end].isalnum() or text[end] in "_."):
                self.fail("malformed number", pos)
            source = number.group()
            self.pos = end
            is_int = not any(c in source for c in ".eE")
            return _Token("num", source, pos, int(source) if is_int else float(source))
        name = _NAME.match(text, pos)
        if name:
            return self._name(name.group(), pos)
        for symbol in ("===", "!=="):
            if text.startswith(symbol, pos):
                self.fail(f"unexpected {symbol!r}", pos, _HINTS[symbol])
        for symbol in _SYMBOLS:
            if text.startswith(symbol, pos):
                self.pos = pos + len(symbol)
                return _Token("op", symbol, pos)
        self.fail(f"unexpected {char!r}", pos, _HINTS.get(char, ""))

    def _string(self, start: int) -> _Token:
        text, quote = self.text, self.text[start]
        out: list[str] = []
        i = start + 1
        while i < len(text):
            char = text[i]
            if char == quote:
                self.pos = i + 1
                return _Token("str", text[start : i + 1], start, "".join(out))
            if char == "\\" and i + 1 < len(text):
                escaped = text[i + 1]
                if escaped not in _ESCAPES:
                    self.fail(f"unknown escape '\\{escaped}'", i)
                out.append(_ESCAPES[escaped])
                i += 2
                continue
            out.append(char)
            i += 1
        self.fail("unterminated string", start)

    def _name(self, source: str, pos: int) -> _Token:
        segments = tuple(source.split("."))
        offset = pos
        for segment in segments:
            if segment.startswith("__"):
                self.fail(f"unexpected {segment!r}", offset, "names cannot start with '__'")
            offset += len(segment) + 1
        first = segments[0]
        if first in _WORDS or first in _RESERVED:
            if len(segments) > 1:
                self.fail("unexpected '.'", pos + len(first))
            if first in _RESERVED:
                self.fail(
                    f"unexpected {first!r}", pos, _HINTS.get(first, "a Python keyword, not allowed")
                )
            self.pos = pos + len(source)
            return _Token("word", first, pos)
        self.pos = pos + len(source)
        return _Token("name", source, pos, segments)

    def advance(self) -> _Token:
        token = self.token
        self.token = self._lex()
        return token

    def at(self, *texts: str) -> bool:
        return self.token.kind in ("op", "word") and self.token.text in texts

    def enter(self, token: _Token) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self.fail(f"nested more than {MAX_DEPTH} levels deep", token.pos)

    def close(self, closing: str, opened: _Token) -> None:
        if not self.at(closing):
            self.unexpected(
                self.token,
                f"expected {closing!r} for the {opened.text!r} at column {opened.pos + 1}",
            )
        self.advance()
        self.depth -= 1

    # grammar

    def condition(self) -> _Node:
        node = self.or_expr()
        if self.token.kind != "end":
            self.unexpected(self.token)
        return node

    def or_expr(self) -> _Node:
        children = [self.and_expr()]
        while self.at("or", "||"):
            self.advance()
            children.append(self.and_expr())
        return children[0] if len(children) == 1 else _Logic("or", tuple(children))

    def and_expr(self) -> _Node:
        children = [self.not_expr()]
        while self.at("and", "&&"):
            self.advance()
            children.append(self.not_expr())
        return children[0] if len(children) == 1 else _Logic("and", tuple(children))

    def not_expr(self) -> _Node:
        if not self.at("not", "!"):
            return self.comparison()
        token = self.advance()
        self.enter(token)
        child = self.not_expr()
        self.depth -= 1
        return _Not(child)

    def comparison(self) -> _Node:
        operands = [self.operand()]
        ops: list[str] = []
        while True:
            if self.at("==", "!=", "<", "<=", ">", ">=", "in"):
                ops.append(self.advance().text)
            elif self.at("not"):
                self.advance()
                if not self.at("in"):
                    self.unexpected(self.token, "expected 'in' after 'not'")
                self.advance()
                ops.append("not in")
            else:
                break
            operands.append(self.operand())
        return operands[0] if not ops else _Compare(tuple(operands), tuple(ops))

    def operand(self) -> _Node:
        token = self.token
        if token.kind in ("num", "str"):
            self.advance()
            return _Literal(token.value, token.text)
        if token.kind == "word" and token.text in _LITERAL_WORDS:
            self.advance()
            return _Literal(_LITERAL_WORDS[token.text], token.text)
        if self.at("("):
            self.advance()
            self.enter(token)
            inner = self.or_expr()
            self.close(")", token)
            return inner
        if self.at("["):
            return self.list_literal()
        if token.kind == "name":
            return self.path()
        self.unexpected(token)

    def list_literal(self) -> _Node:
        opened = self.advance()
        self.enter(opened)
        items: list[Any] = []
        texts: list[str] = []
        while not self.at("]"):
            token = self.token
            if token.kind in ("num", "str"):
                items.append(token.value)
            elif token.kind == "word" and token.text in _LITERAL_WORDS:
                items.append(_LITERAL_WORDS[token.text])
            else:
                self.unexpected(token, "a list holds numbers, strings, true, false and null")
            texts.append(token.text)
            self.advance()
            if not self.at(","):
                break
            self.advance()
        self.close("]", opened)
        return _List(tuple(items), tuple(texts))

    def path(self) -> _Node:
        token = self.advance()
        segments: tuple[str, ...] = token.value
        if self.at("("):
            if segments != ("len",):
                self.fail(f"unknown function {token.text!r}", token.pos, "the only function is len")
            opened = self.advance()
            self.enter(opened)
            arg = self.or_expr()
            self.close(")", opened)
            return _Len(arg)
        parts = list(segments)
        text = token.text
        if segments == ("state",) and self.at("["):
            parts, text = [], "state"
        while self.at("["):
            self.advance()
            key = self.token
            if key.kind != "str":
                self.unexpected(key, "expected a quoted key after '['")
            self.advance()
            if not self.at("]"):
                self.unexpected(self.token, "expected ']'")
            self.advance()
            parts.append(key.value)
            text += f"[{key.text}]"
        return _Path(tuple(parts), text)


# --- the public API ------------------------------------------------------------------


@dataclass(frozen=True)
class Condition:
    """A parsed world-state condition; immutable, so one instance serves every turn.

    Attributes:
        text: The condition as written.
        names: The paths it reads, dotted (``hp``, ``affinity.marla``); the part
            before the first dot is the variable.
    """

    text: str
    names: frozenset[str]
    _root: _Node = field(repr=False)

    @property
    def variables(self) -> frozenset[str]:
        """The variables it reads (the first segment of each of :attr:`names`)."""
        return frozenset(name.partition(".")[0] for name in self.names)

    def evaluate(self, state: Mapping[str, Any]) -> bool:
        """Whether the condition holds in ``state``; never raises.

        Args:
            state: A stored world state (``{"variables": ..., "active_lore_ids": ...,
                "summary": ...}``) or a flat mapping of variable names to values.

        Returns:
            ``True`` if it holds. Missing names are null; type mismatches are false.
        """
        return self._root.truth(_Scope(state), False)[0]

    def explain(self, state: Mapping[str, Any]) -> str:
        """Why the condition holds or not in ``state``, for a trace; never raises.

        Args:
            state: As for :meth:`evaluate`.

        Returns:
            E.g. ``hp < 10 is false (hp = 42)``, or for ``and``/``or``/``not`` the
            whole condition's verdict followed by the comparisons that decided it.
        """
        return self.check(state)[1]

    def check(self, state: Mapping[str, Any]) -> tuple[bool, str]:
        """Both :meth:`evaluate` and :meth:`explain` in one evaluation.

        Args:
            state: As for :meth:`evaluate`.

        Returns:
            ``(holds, reason)``.
        """
        root = self._root
        result, leaves = root.truth(_Scope(state), True)
        if isinstance(root, (_Not, _Logic)):
            return result, f"{root.render()} is {_word(result)}: " + "; ".join(leaves)
        return result, leaves[0]

    def __str__(self) -> str:
        """The condition in canonical form (``&&`` as ``and``, single spaces...)."""
        return self._root.render()


def parse_condition(text: str) -> Condition:
    """Parse a condition; the same text returns the same (cached) :class:`Condition`.

    Args:
        text: The condition, e.g. ``affinity.marla >= 50 and 'met_marla' in flags``.

    Returns:
        The parsed condition.

    Raises:
        ConditionError: The text is not a string, is empty, longer than
            :data:`MAX_LENGTH`, nested deeper than :data:`MAX_DEPTH`, or not in the
            grammar; the message quotes the text and gives the column, e.g.
            ``hp << 10: unexpected '<' at column 5``.
    """
    if not isinstance(text, str):
        raise ConditionError(f"a condition is a string, not {type(text).__name__}")
    return _parse(text)


@functools.lru_cache(maxsize=CACHE_SIZE)
def _parse(text: str) -> Condition:
    if len(text) > MAX_LENGTH:
        raise ConditionError(
            f"{_shown(text)}: a condition is at most {MAX_LENGTH} characters, "
            f"this one has {len(text)}"
        )
    if not text.strip():
        raise ConditionError("a condition cannot be empty")
    root = _Parser(text).condition()
    names = frozenset(".".join(parts) for parts in root.paths())
    return Condition(text, names, root)
