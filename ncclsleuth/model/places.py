"""Lines kept by their place: one integer, ``line << PLACE_BITS | reference``, where the model keeps
no event of a line it only quotes, and the event made again from the line when it is quoted.

The reference is :func:`ncclsleuth.util.reread.ref`'s (byte offset, length and a check of the
text); the line is read again from its file and parsed again by the parser
(:mod:`ncclsleuth.parse.again`), which :mod:`.build` hands over as :data:`make_again` (the model
does not import the parse stage).  Which lines are kept so, and why their events can be made
again as they were, is said where each is placed: a process's evidence lines and a rank's Init
lines (:func:`ncclsleuth.model.job.place`: NCCL ``INFO`` lines with their own prefix), a rank's
first step line (:func:`ncclsleuth.model.job.step_place`), a file's last and progress lines
(:func:`ncclsleuth.model.job.track_places`).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import events as E

#: a line kept by its place: ``line << PLACE_BITS | reference``; a reference of a byte offset past
#: 2**42 (4 TiB) does not fit: its event is kept
PLACE_BITS = 80
_PLACE_MASK = (1 << PLACE_BITS) - 1
#: (file, line, reference, kind) -> the event made again from the line: the parser's
#: (``ncclsleuth.parse.again.event``), set by :mod:`.build`, which builds the models that keep
#: places
make_again: Callable[[str, int, int, str], E.Event] | None = None


def as_event(source: str | None, kept: E.Event | int | None, kind: str) -> Any:
    """``kept`` (an event, None, or a line's place in ``source``) as the ``kind`` event of its line."""
    if type(kept) is not int:
        return kept
    if make_again is None or source is None:  # set wherever a model that keeps places is built
        raise RuntimeError("ncclsleuth.model.build sets make_again: a place cannot be read without it")
    return make_again(source, kept >> PLACE_BITS, kept & _PLACE_MASK, kind)


def line_place(ev: E.Event) -> int | None:
    """The place of event ``ev``'s line (read in ``ev.source``) where its text is kept by reference
    and fits, else None: for lines whose event depends on their text alone."""
    where = ev._text  # type: ignore[attr-defined]  # the slot behind Event.text
    if where.__class__ is not int or where >> PLACE_BITS:
        return None
    return ev.line << PLACE_BITS | where
