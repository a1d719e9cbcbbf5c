"""Value records inside events (interfaces, IB devices, tree edges): frozen, compared and
hashed by value."""
from __future__ import annotations

from typing import Any

from ..util.classes import dataclass
from .base import field_names


class _Value:
    """Base of the value records: pickled as (class, field values), rebuilt by one
    ``__init__`` call instead of a frozen dataclass's ``__setstate__`` (one
    ``object.__setattr__`` per field): unpickling a worker's results took 26% less."""

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), tuple([getattr(self, n) for n in field_names(type(self))])


#: the base of every value record (what a learned plan may rebuild from its fields: :mod:`ncclsleuth.parse.learned`)
ValueRecord = _Value


@dataclass(frozen=True, slots=True)
class Iface(_Value):
    """One socket interface: ``[idx]name:addr``."""

    name: str
    addr: str | None = None
    idx: int | None = None


@dataclass(frozen=True, slots=True)
class IbDev(_Value):
    """One NET/IB device: ``[idx]mlx5_0:1/RoCE``."""

    hca: str
    port: int | None
    link: str
    idx: int | None = None
    rail: int | None = None  # 2.30.7 ``[idx]hca:port:rail:plane/link``
    plane: int | None = None


@dataclass(frozen=True, slots=True)
class TreeEdge(_Value):
    """One ``[ch] d0/d1/d2->me->up`` entry of a ``Trees`` line."""

    channel: int
    down: tuple[int, ...]
    me: int
    up: int
