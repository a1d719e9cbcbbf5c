"""Ingest: what the user pointed at, as numbered text lines, one input at a time.

:mod:`.sources` (files, folders, stdin, notices), :mod:`.memory` (bytes in memory), :mod:`.decode`
(compression, encodings, repairs, the line reader), :mod:`.blocks` (the block reader of
``analyze``), :mod:`.follow` (growing files, for ``watch``) and :mod:`.remote`
(object-store URLs through fsspec).  Nothing here knows what a line means.
"""
