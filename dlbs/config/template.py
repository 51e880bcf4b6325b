"""Parse spec strings into templates of literals, `${name}`/`$<name>` references and `$(...)$`.

Parsing happens once per distinct string; resolution then walks the parsed parts. The
grammar (docs/language.md sections 4 and 5):

- `$${`, `$$<`, `$$(` are the literal texts `${`, `$<`, `$(`;
- `${NAME}` / `$<NAME>` reference a parameter; NAME may itself hold references, resolved
  innermost first (`${${exp.framework}.docker_image}`);
- `$( EXPR )$` is a computed value; EXPR may hold references but not another `$(`;
- any other `$` (such as shell's `$HOME`) is literal text.
"""

from __future__ import annotations

from dlbs.errors import ConfigError
from dlbs.util.records import FrozenRecord

_OPENERS = {"{": "}", "<": ">"}
_ESCAPABLE = "{<("


class Ref(FrozenRecord):
    """A reference; `name` is a plain string, or a Template when the name is computed."""

    __slots__ = ("name",)

    def __init__(self, name: str | Template) -> None:
        self.name = name


class Expr(FrozenRecord):
    """A `$( ... )$` computed value; its body is rendered, then evaluated."""

    __slots__ = ("body", "literals", "refs")

    def __init__(self, body: Template, literals: tuple[str, ...] = (),
                 refs: tuple[Ref, ...] = ()) -> None:
        self.body = body
        # The body as the evaluator takes it: literal text between references, and the
        # references (the text is literals[0], then each reference's value and the next
        # literal).
        self.literals = literals
        self.refs = refs


Part = str | Ref | Expr


class Template(FrozenRecord):
    """A parsed string: literal text interleaved with references and expressions."""

    __slots__ = ("parts", "static_refs", "patterns", "single")
    FIELDS = ("parts", "static_refs", "patterns")  # `single` follows from `parts`

    def __init__(self, parts: tuple[Part, ...], static_refs: frozenset[str] = frozenset(),
                 patterns: frozenset[tuple[str, ...]] = frozenset()) -> None:
        self.parts = parts
        # Names referenced directly (not through a computed name).
        self.static_refs = static_refs
        # What computed names can be: the literal pieces of the name, with anything between
        # two pieces (`${${a}.b}` gives ("", ".b")). `wildcard_match` finds the names it can
        # reach.
        self.patterns = patterns
        # The one reference or expression that makes up the whole string, if that is so.
        self.single: Ref | Expr | None = parts[0] if len(parts) == 1 and \
            not isinstance(parts[0], str) else None

    @property
    def is_literal(self) -> bool:
        return all(isinstance(part, str) for part in self.parts)


def escape(text: str) -> str:
    """Return a template string that renders to exactly `text`."""
    if "$" not in text:
        return text
    for opener in _ESCAPABLE:
        text = text.replace("$" + opener, "$$" + opener)
    return text


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.closed = False

    def fail(self, problem: str) -> ConfigError:
        shown = repr(self.text)
        if len(shown) > 200:
            shown = shown[:197] + "..."
        return ConfigError(f"{problem} in {shown}")

    def parse(self, closer: str | None = None, in_expression: bool = False) -> Template:
        """Parse until `closer` (`}` or `>` for a name, `)$` for an expression) or the end."""
        text, parts, literal = self.text, [], []
        static_refs: set[str] = set()
        patterns: set[tuple[str, ...]] = set()
        while self.pos < len(text):
            if closer is not None and text.startswith(closer, self.pos):
                self.pos += len(closer)
                self.closed = True
                return _build(parts, literal, static_refs, patterns)
            char = text[self.pos]
            if char != "$":
                nxt = text.find("$", self.pos)
                end = len(text) if nxt < 0 else nxt
                if closer is not None:
                    close_at = text.find(closer, self.pos, end + len(closer) - 1)
                    if close_at >= 0:
                        end = close_at
                literal.append(text[self.pos:end])
                self.pos = end
                continue
            after = text[self.pos + 1:self.pos + 2]
            if after == "$" and text[self.pos + 2:self.pos + 3] in _ESCAPABLE and \
                    text[self.pos + 2:self.pos + 3]:
                literal.append("$" + text[self.pos + 2])
                self.pos += 3
            elif after in _OPENERS:
                start = self.pos
                self.pos += 2
                name = self.parse(closer=_OPENERS[after], in_expression=in_expression)
                if not self.closed:
                    raise self.fail(f"unbalanced reference {text[start:start + 2]!r} (no closing "
                                    f"{_OPENERS[after]!r})")
                if name.is_literal:
                    plain = "".join(name.parts)
                    if not plain.strip():
                        raise self.fail("empty reference")
                    static_refs.add(plain)
                    ref = Ref(plain)
                else:
                    static_refs |= name.static_refs
                    patterns |= name.patterns
                    patterns.add(_segments(name.parts))
                    ref = Ref(name)
                _flush(parts, literal)
                parts.append(ref)
            elif after == "(":
                if in_expression:
                    raise self.fail("an expression cannot contain another '$('")
                start = self.pos
                self.pos += 2
                body = self.parse(closer=")$", in_expression=True)
                if not self.closed:
                    raise self.fail("unbalanced expression '$(' (no closing ')$')")
                if not body.parts:
                    raise self.fail(f"empty expression {text[start:self.pos]!r}")
                static_refs |= body.static_refs
                patterns |= body.patterns
                _flush(parts, literal)
                parts.append(_expression(body))
            else:
                literal.append("$")
                self.pos += 1
        # Ran off the end: the caller reports the opener that is not closed.
        self.closed = False
        return _build(parts, literal, static_refs, patterns)


def _flush(parts: list[Part], literal: list[str]) -> None:
    if literal:
        parts.append("".join(literal))
        literal.clear()


def _expression(body: Template) -> Expr:
    literals, refs = [""], []
    for part in body.parts:
        if isinstance(part, str):
            literals[-1] += part
        else:
            refs.append(part)
            literals.append("")
    return Expr(body, tuple(literals), tuple(refs))


def _segments(parts: tuple[Part, ...]) -> tuple[str, ...]:
    """The literal pieces of a computed name; a wildcard stands between each two."""
    segments = [""]
    for part in parts:
        if isinstance(part, str):
            segments[-1] += part
        elif segments[-1] or len(segments) == 1:
            segments.append("")
    return tuple(segments)


def wildcard_match(segments: tuple[str, ...], name: str) -> bool:
    """Whether `name` is the pieces of `segments` with anything between them.

    Greedy from both ends, leftmost in between: linear in the name, where the equivalent
    regular expression (`.*a.*a.*`) backtracks without end on names that do not match.
    """
    first, last = segments[0], segments[-1]
    if len(segments) == 1:
        return name == first
    if len(name) < len(first) + len(last) or not name.startswith(first) or \
            not name.endswith(last):
        return False
    position, end = len(first), len(name) - len(last)
    for middle in segments[1:-1]:
        found = name.find(middle, position, end)
        if found < 0:
            return False
        position = found + len(middle)
    return True


def _build(parts: list[Part], literal: list[str], refs: set[str],
           patterns: set[tuple[str, ...]]) -> Template:
    _flush(parts, literal)
    return Template(tuple(parts), frozenset(refs), frozenset(patterns))


_cache: dict[str, Template] = {}


def parse(text: str) -> Template:
    """Parse `text` (cached: specs repeat the same strings across thousands of experiments)."""
    template = _cache.get(text)
    if template is None:
        if "$" not in text:
            template = Template((text,) if text else ())
        else:
            template = _Parser(text).parse()
        _cache[text] = template
    return template
