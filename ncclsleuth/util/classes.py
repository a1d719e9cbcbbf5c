"""``dataclass`` with its generated methods compiled once per Python build, not per start.

``dataclasses.dataclass`` writes the source of ``__init__``, ``__repr__``, ``__eq__`` (and
``__setattr__``, ``__hash__`` for frozen classes) and compiles it with ``exec``: ~0.5 ms a
class.  A plain ``ncclsleuth analyze`` creates 42 of them at import, 25 ms of a ~90 ms
chat-ops answer (the whole answer before the restructure made 18).  This decorator is
``dataclasses.dataclass`` itself; while it runs, the ``exec`` that module calls takes the
code object from :data:`~ncclsleuth.util.cache.CODE` (compiled code by source text, kept
in the user's cache folder) instead of compiling the text again.  The source is the same,
so the code is the same: the class is exactly what ``dataclasses.dataclass`` makes.
"""
from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from .cache import CODE

if TYPE_CHECKING:  # typing's own from Python 3.11; type checkers know it for 3.10 too
    from typing_extensions import dataclass_transform
elif sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # Python 3.10: the decorator only informs type checkers
    def dataclass_transform(**_: Any) -> Any:
        return lambda obj: obj

T = TypeVar("T")


def _kept_exec(source: str, globals: dict[str, Any] | None = None, locals: dict[str, Any] | None = None) -> None:
    """``exec(source, globals, locals)`` with the code compiled for this source before."""
    exec(CODE.compile(source, "<string>"), globals, locals)  # noqa: S102 - dataclasses' own generated source


def _make(cls: type[T], options: dict[str, Any]) -> type[T]:
    # a module global named ``exec`` in dataclasses is the one its functions call; it is
    # removed again at once (another thread making a dataclass meanwhile gets the same code)
    dataclasses.exec = _kept_exec  # type: ignore[attr-defined]
    try:
        return dataclasses.dataclass(cls, **options)
    finally:
        dataclasses.__dict__.pop("exec", None)


@overload
@dataclass_transform(field_specifiers=(dataclasses.field,))
def dataclass(cls: type[T], /) -> type[T]: ...


@overload
def dataclass(*, frozen: bool = False, slots: bool = False, eq: bool = True, order: bool = False,
              repr: bool = True, unsafe_hash: bool = False) -> Callable[[type[T]], type[T]]: ...


def dataclass(cls: type[T] | None = None, /, **options: Any) -> Any:
    """``dataclasses.dataclass`` (same options, same class), compiled from the code store."""
    if cls is None:
        return lambda c: _make(c, options)
    return _make(cls, options)
