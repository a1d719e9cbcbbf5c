"""Derived facts (see :mod:`.base`), one module per area; importing this package
registers them all in :data:`FACTS` (and their declarations in :data:`SPECS`)."""
from __future__ import annotations

from . import (  # noqa: F401 (they register)
    collectives,
    consistency,
    flight,
    host,
    init,
    knowledge,
    live,
    nccltests,
    network,
    ras,
    rasreport,
    rendezvous,
    wholejob,
)
from .base import FACTS, LIVE, PER_LINE, SPECS, Fact, FactSpec, LazyRecord, Record, fact, median, ranges

__all__ = ["FACTS", "LIVE", "PER_LINE", "SPECS", "Fact", "FactSpec", "LazyRecord", "Record", "fact", "median", "ranges"]
