"""Typed events: what one log line (or one multi-line block) means.

The base (:mod:`.base`: the event class machinery, the registry of kinds) and the value
records (:mod:`.values`) come first; the kinds are grouped by the program that prints
them: :mod:`.nccl`, :mod:`.torch` (PyTorch distributed), :mod:`.nccltests`, :mod:`.host` (the kernel,
the driver, diagnostic tools, crash handlers, network plugins) and :mod:`.generic`
(tracebacks, exceptions, GPU errors, training steps, plain text); :mod:`.flight` holds
what is not a log line (Flight Recorder entries, ``ncclras`` reports).
Importing this package registers every kind (``REGISTRY``: kind name -> class).
"""
from __future__ import annotations

from .base import ERROR_KINDS, REGISTRY, Event, ev, field_names, is_record, plain, register
from .flight import *  # noqa: F403
from .generic import *  # noqa: F403
from .host import *  # noqa: F403
from .nccl import *  # noqa: F403
from .nccltests import *  # noqa: F403
from .torch import *  # noqa: F403
from .values import IbDev, Iface, TreeEdge

__all__ = ["ERROR_KINDS", "REGISTRY", "Event", "ev", "field_names", "is_record", "plain", "register",
           "IbDev", "Iface", "TreeEdge"]
__all__ += [cls.__name__ for cls in REGISTRY.values()]
