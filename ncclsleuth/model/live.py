"""What ``watch`` knows beyond the lines: when each process was last heard of, and where it is.

The watcher (:class:`ncclsleuth.live.Watcher`) keeps a :class:`LiveView` on the model
(``JobModel.live``) before its rules run, so facts about silence (``silent_ranks``) are
ordinary facts of the model; outside ``watch`` the model has none and those facts are
empty.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import field

from .. import events as E
from ..util.classes import dataclass
from .stats import ranges

Key = tuple[str, int | None]


@dataclass
class Unit:
    """One process of the job for the live view (NCCL lines and its rank-tagged PyTorch lines merged)."""

    key: Key
    host: str
    last_wall: float = 0.0
    phase: str = "startup"
    phase_seq: int = 0
    last_event: E.Event | None = None
    last_seq: int = 0
    launcher: int | None = None
    comm_ranks: list[int] = field(default_factory=list)
    nccl: bool = False
    past_init: bool = False

    @property
    def ranks(self) -> list[int]:
        return [self.launcher] if self.launcher is not None else self.comm_ranks


@dataclass
class LiveView:
    """The processes as the watcher sees them, at wall time ``now``, with its ``silence`` threshold."""

    now: float
    silence: float
    units: dict[Key, Unit]


def rank_ranges(ranks: Iterable[int]) -> str:
    """``[40, 41, 42, 47]`` -> ``"40-42, 47"``."""
    return ranges(ranks, ", ")
