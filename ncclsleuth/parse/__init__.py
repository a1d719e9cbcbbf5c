"""Parse: text lines -> typed events.

:mod:`.envelope` peels launcher/timestamp/Markdown wrappers and finds the NCCL prefix;
:mod:`.grammar` is the message grammar (``messages.lark``) behind one entry point, the
shape cache (``ShapeCache.parse``: the first line of each message shape through Lark,
later ones rebuilt from their values); :mod:`.build` turns grammar fields into typed
event fields; :mod:`.anchors` says where a message may start in a line and which lines
can hold one (both declared in the grammar); :mod:`.lines` is the stateful per-file
parser (tracebacks, failure blocks) and :mod:`.stream` the line-at-a-time event stream
of ``ncclsleuth parse``.  :mod:`.catalog` gives any other NCCL line its format id.
"""
