"""The fact registry: named, tested questions the rules ask of the job model.

A fact is a function ``JobModel -> list[record]``; each record carries the values a rule
may filter on and template into its message, plus ``evidence`` (the events that prove
it).  Rules refer to facts by name (``fact: bad_interface``); the YAML stays data and
the reasoning that needs code lives in this package, where it is unit-tested.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..job import JobModel
from ..stats import median, ranges

__all__ = ["FACTS", "LIVE", "Fact", "FactFn", "fact", "median", "ranges"]

Fact = dict[str, Any]
FactFn = Callable[[JobModel], list[Fact]]
FACTS: dict[str, FactFn] = {}
#: facts of a job watched live: they read ``JobModel.live`` and are empty without it
LIVE: set[str] = set()


def fact(fn: FactFn | None = None, *, live: bool = False) -> Any:
    """Register a fact under its function name (``@fact`` or ``@fact(live=True)``)."""

    def deco(f: FactFn) -> FactFn:
        FACTS[f.__name__] = f
        if live:
            LIVE.add(f.__name__)
        return f

    return deco(fn) if fn is not None else deco
