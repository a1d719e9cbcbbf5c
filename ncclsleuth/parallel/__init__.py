"""Engines that run the per-file unit (:func:`ncclsleuth.model.build.parse_one`) elsewhere:
:mod:`.forked` (this process plus forked workers, the protocol), :mod:`.local` (runs of
local files over them), :mod:`.split` (a big file's pieces over them, assembled here into
the file's model), :mod:`.pool` (URL inputs, a process pool) and :mod:`.cluster` (Dask).
Each yields per-file (or per-run) results in input order.
"""
