"""Lines kept by their place: one integer, ``line << PLACE_BITS | reference``, where the model keeps
no event of a line it only quotes, and the event made again from the line when it is quoted.

The reference is :func:`ncclsleuth.util.reread.ref`'s (byte offset, length and a check of the
text); the line is read again from its file and parsed again by the parser
(:mod:`ncclsleuth.parse.again`), which :mod:`.build` hands over as :data:`make_again` (the model
does not import the parse stage).  Which lines are kept so, and why their events can be made
again as they were, is said where each is placed: a process's evidence lines and a rank's Init
lines (:func:`ncclsleuth.model.job.place`: NCCL ``INFO`` lines with their own prefix), a rank's
first step line and a file's last and progress lines (:func:`own_place`, asked by
:mod:`.merge`: ``JobModel.step_evidence``, :func:`ncclsleuth.model.job.track_places`).
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


def own_place(source: object, kept: E.Event | int | None) -> E.Event | int | None:
    """What a model keeps of ``kept``, a line quoted as the line of file ``source``: its place where
    it is an event of that file whose text is by reference (:func:`line_place`), else ``kept`` as it
    is (already a place, None, another file's line, or text kept).  For lines whose event depends on
    their text alone and is read again only when quoted: a rank's first step line (keyed by its
    file where the loop prints no rank: an int key is never a file), a file's last and progress
    lines."""
    if kept is None or type(kept) is int or kept.source != source:  # type: ignore[union-attr]
        return kept
    at = line_place(kept)  # type: ignore[arg-type]  # an event: not an int
    return kept if at is None else at
