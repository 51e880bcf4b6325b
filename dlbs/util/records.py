"""Small value classes whose `repr`, `==` and hash are those @dataclass would write.

@dataclass writes each class's methods as source text and compiles it when the module is
imported: about 4 million instructions a class, 45 for the twelve classes of the spec, the
templates, the resolver and the Docker arguments, a tenth of the start-up of `dlbs plan`
(the recipes' Invocation and ContainerSpec stay dataclasses: the Docker target uses
`dataclasses.replace` on them). A `Record` subclass
names its fields in `__slots__` and writes its `__init__`; the other methods are these,
written once. `FIELDS` may leave out a slot that is derived from the others.
"""

from __future__ import annotations

from typing import Any


class Record:
    """`repr` and `==` by the fields (`FIELDS`, by default `__slots__`), in their order."""

    __slots__ = ()
    FIELDS: tuple[str, ...] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.FIELDS or self.__slots__)

    def __repr__(self) -> str:
        fields = self.FIELDS or self.__slots__
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in fields)
        return f"{type(self).__qualname__}({shown})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # mutable: as @dataclass(eq=True)


class FrozenRecord(Record):
    """A `Record` that is hashable by its fields; it is never changed once made."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self._values())
