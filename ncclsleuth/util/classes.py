"""``dataclass`` with its generated methods compiled once per Python build, not per start.

``dataclasses.dataclass`` writes the source of ``__init__``, ``__repr__``, ``__eq__`` (and
``__setattr__``, ``__hash__`` for frozen classes) and compiles it with ``exec``: ~0.5 ms a
class.  A plain ``ncclsleuth analyze`` creates 42 of them at import, 25 ms of a ~90 ms
chat-ops answer (the whole answer before the restructure made 18).  This decorator is
``dataclasses.dataclass`` itself; while it runs, the ``exec`` that module calls takes the
code object from :data:`~ncclsleuth.util.cache.CODE` (compiled code by source text, kept
in the user's cache folder) instead of compiling the text again.  The source is the same,
so the code is the same: the class is exactly what ``dataclasses.dataclass`` makes.

:class:`NamedTuple` does the same for ``typing.NamedTuple``'s classes: ``typing`` compiles each
field's annotation (a string, with ``from __future__ import annotations``) into a ``ForwardRef``,
and ``collections.namedtuple`` evaluates the source of ``__new__``: 12 classes took ~5 ms of a
~180 ms start, ~3.5 ms of it compiling.  Type checkers see ``typing.NamedTuple`` itself.
"""
from __future__ import annotations

import collections
import dataclasses
import sys
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
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


def _kept_compile(source: Any, filename: str, mode: str, flags: int = 0, dont_inherit: bool = False,
                  optimize: int = -1) -> Any:
    """``compile`` as ``typing.ForwardRef`` calls it (an annotation's expression), from the code
    store.  The caller, ``typing``, has no ``__future__`` import: nothing inherited either way."""
    if mode == "eval" and flags == 0 and optimize == -1 and isinstance(source, str):
        return CODE.compile(source, filename, "eval")
    return compile(source, filename, mode, flags, True, optimize)


def _kept_eval(source: Any, globals: dict[str, Any] | None = None, locals: Any = None) -> Any:
    """``eval`` as ``collections.namedtuple`` calls it (the source of ``__new__``), compiled from the code store."""
    code = CODE.compile(source, "<string>", "eval") if isinstance(source, str) else source
    return eval(code, globals, locals)  # noqa: S307 - collections' own generated source


@contextmanager
def _from_store(module: ModuleType, **builtins: Callable[..., Any]) -> Iterator[None]:
    """While a class is made: ``module``'s functions call these instead of the builtins of the same
    names (``exec``, ``compile``, ``eval``: a module global is what they find first), which take the
    code from the code store; removed again at once (another thread making a class meanwhile gets
    the same code)."""
    for name, fn in builtins.items():
        setattr(module, name, fn)
    try:
        yield
    finally:
        for name in builtins:
            module.__dict__.pop(name, None)


def _make(cls: type[T], options: dict[str, Any]) -> type[T]:
    with _from_store(dataclasses, exec=_kept_exec):
        return dataclasses.dataclass(cls, **options)


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


if TYPE_CHECKING:
    from typing import NamedTuple
elif hasattr(typing, "NamedTupleMeta") and hasattr(typing, "_NamedTuple"):
    class _KeptNamedTupleMeta(typing.NamedTupleMeta):
        """``typing.NamedTupleMeta`` with its compiles and ``collections``' eval from the code store."""

        def __new__(mcls, typename: str, bases: tuple[type, ...], ns: dict[str, Any]) -> type:
            bases = tuple(typing._NamedTuple if b is NamedTuple else b for b in bases)
            with _from_store(typing, compile=_kept_compile), _from_store(collections, eval=_kept_eval):
                return super().__new__(mcls, typename, bases, ns)

    #: the base of a NamedTuple class (``class Plan(NamedTuple): ...``): ``typing.NamedTuple``'s class,
    #: compiled from the code store
    NamedTuple = type.__new__(_KeptNamedTupleMeta, "NamedTuple", (), {})
else:  # a Python whose typing is made otherwise: its own
    from typing import NamedTuple
