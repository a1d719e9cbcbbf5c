"""``python -m ncclsleuth`` and the ``ncclsleuth`` console script (``[project.scripts]``).

Start-up runs with the cyclic garbage collector off, until the command starts
(:func:`ncclsleuth.cli.main` turns it on again, so ``serve`` and ``watch`` run with it).
Importing click, the CLI and the command's modules allocates tens of thousands of
objects that live as long as the process: the ~50 collection passes over them freed
nothing and took ~3 ms of a ~60 ms chat-ops answer.  Only this entry point pauses it: a
program that imports ``ncclsleuth.cli`` keeps its collector as it was.
"""
from __future__ import annotations

import gc


def entry() -> None:
    """The command line, its start-up without collection passes."""
    paused = gc.isenabled()
    gc.disable()
    from .cli import entry as run

    run(collector_paused=paused)


if __name__ == "__main__":
    entry()
