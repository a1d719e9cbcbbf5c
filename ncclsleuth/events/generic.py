"""Events any program's output can hold: Python tracebacks and exceptions, CUDA out of
memory, GPU/driver errors, training-step timings, and lines that matched nothing."""
from __future__ import annotations

from .base import Event, ev


@ev("traceback", error=True)
class Traceback(Event):
    exc_type: str = ""
    message: str = ""
    start_line: int | None = None
    frames: int = 0
    last_frame: str | None = None
    #: the innermost frame of the program itself (not the interpreter's or an installed
    #: package's): ``train.py:183 in main``, the code line where this rank stopped
    user_frame: str | None = None
    #: the innermost barrier/collective call of the traceback (``all_reduce``, ``barrier``)
    call: str | None = None


@ev("sync_call")
class SyncCall(Event):
    """A traceback frame or code line inside a barrier/collective: where a rank was waiting."""

    call: str = ""
    code: str = ""


@ev("exception", error=True)
class ExceptionLine(Event):
    exc_type: str = ""
    message: str = ""


@ev("cuda_oom", error=True)
class CudaOom(Event):
    detail: str = ""


@ev("hw_error", error=True)
class HwError(Event):
    what: str = ""  # ecc | xid | fell_off_bus | ...
    detail: str = ""


@ev("step_time")
class StepTime(Event):
    """One training step's wall time, as the training loop printed it (for stragglers)."""

    step: int | None = None
    ms: float | None = None


@ev("progress")
class Progress(Event):
    """A rank's last training-progress line (``step 14 loss ...``, ``iter 83123: ...``, a tqdm
    bar ``47%|...| 1695000/3634744 [30:09<33:25, ...]``): how far it got, found at the end of
    its output (one per rank and file)."""

    step: int | None = None
    total: int | None = None
    #: seconds a progress bar says have elapsed (tqdm's ``[mm:ss<``)
    elapsed_s: int | None = None
    unit: str = ""  # step | iter | bar


@ev("last_line")
class LastLine(Event):
    """The last line a file (or a rank of an interleaved file) printed: where its output stops."""


@ev("text")
class Text(Event):
    """A line that matched nothing: kept, never dropped."""


@ev("warn_text", error=True)
class WarnText(Event):
    """A WARN/error line we recognise as a problem but not its meaning."""

    message: str = ""
