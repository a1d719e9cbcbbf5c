"""Derived facts (see :mod:`.base`), one module per area; importing this package
registers them all in :data:`FACTS`."""
from __future__ import annotations

from . import collectives, consistency, init, knowledge, live, nccltests, network, ras  # noqa: F401 (they register)
from .base import FACTS, LIVE, Fact, fact, median, ranges

__all__ = ["FACTS", "LIVE", "Fact", "fact", "median", "ranges"]
