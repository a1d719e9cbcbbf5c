"""Where a message may start in a line, and which lines may hold one at all.

The anchors find where a known message starts inside a non-NCCL line (PyTorch,
nccl-tests, NCCL text pasted without its prefix); the prefilter keywords let the
analyze fast path skip, inside the regex engine, the lines that cannot mean anything.
"""
from __future__ import annotations

import re

# Where a meaningful message may start inside a non-NCCL line (PyTorch, nccl-tests,
# NCCL text pasted without its prefix).  Order does not matter: the earliest wins.
# Every pattern starts with a literal character: grouped by it (see first_char_trie)
# the alternation gets a first-character set, which lets the regex engine skip the
# positions no anchor can start at (one big flat alternation cost ~40 us a line).
ANCHOR_PATTERNS = (
    r"NCCL version \d", r"NET/IB\w*\s*:", r"NET/Socket", r"NET/Plugin", r"Bootstrap ?:", r"Watchdog caught",
    r"Caught collective operation timeout", r"caught collective operation timeout", r"Timeout at NCCL work",
    r"Exception \(either", r"failure detected by watchdog", r"Received a dump signal", r"NCCL Work update",
    r"Timeout at collective", r"\[\d+(?:, *\d+)*\] (?:finished|joined|started)", r"To our best knowledge",
    r"Detected mismatch between collectives", r"NCCL error in:",
    r"nccl(?:SystemError|RemoteError|InternalError|InvalidUsage|InvalidArgument|UnhandledCudaError):",
    r"The client socket", r"The (?:IPv[46] )?network addresses", r"No socket on", r"Socket Timeout",
    r"Timed out initializing process group", r"\[\d+\] is setting up NCCL", r"Failed to recv, got 0",
    r"wait timeout after", r"The server socket", r"\[Errno 98\]", r"failed \(exitcode", r"Root Cause \(first",
    r"Failures:$", r"CUDA error:", r"CUDA out of memory", r"uncorrectable ECC", r"NVRM: Xid", r"fallen off the bus",
    r"ProcessGroupNCCL's watchdog got stuck", r"Heartbeat monitor timed out",
    r"ProcessGroupNCCL (?:initialization options|initialized with|environments)",
    r"Environment variable \w+ is deprecated", r"Signal \d+ \(", r"Work WorkNCCL", r"#\s+Rank\s",
    r"# Avg bus bandwidth", r"# Out of bounds", r"Test (?:\w+ )?failure", r"\.\. \S+ pid \d+: Test failure",
    r"Duplicate GPU detected", r"Multiple Ranks are using", r"Error while (?:creating|attaching)", r"Call to \w+ ",
    r"Cuda failure", r"Failed to CUDA", r"Failed to open libibverbs", r"Got completion",
    r"Connection closed by remote peer", r"Accept failed", r"connecting to address with family",
    r"Connect to \S+ failed", r"Attribute \w+ of node", r"Mismatched NCCL version", r"Socket recv failed",
    r"Using network \w", r"Some NCCL operations have failed", r"To avoid data inconsistency",
    r"Terminating the process after attempting", r"Observed flight recorder dump signal",
    r"Process group watchdog thread terminated", r"Rank \d+\s*$",
)
# Where a training-step timing message starts (also an anchor): a word boundary before
# "iter", checked after the literal so that the literal stays the first character.
STEP_PATTERNS = (r"i(?<!\wi)ter \d+: loss", r"i(?<!\wi)teration +\d+/")
ANCHOR_PATTERNS += STEP_PATTERNS


def first_char_trie(patterns: tuple[str, ...]) -> str:
    """One alternation of regexes grouped by their literal first character (``\\x`` counts as one)."""
    groups: dict[str, list[str]] = {}
    for p in patterns:
        n = 2 if p.startswith("\\") else 1
        groups.setdefault(p[:n], []).append(p[n:])
    return "|".join(head + (rest[0] if len(rest) == 1 else "(?:" + "|".join(rest) + ")")
                    for head, rest in groups.items())


_ANCHORS = re.compile(first_char_trie(ANCHOR_PATTERNS))
# The one anchor without a literal first character (the function name before ": Connect
# to"), searched only in bodies holding its literal part.  (?<!\w) keeps it linear on word runs.
_CONNECT_ANCHOR = re.compile(r"(?<!\w)\w+: [Cc]onnect to \S+ (?:failed|returned)")


def anchor_starts(body: str) -> list[int]:
    """Positions where a known message may start in ``body``, in order."""
    starts = [m.start() for m in _ANCHORS.finditer(body)]
    if "onnect to " in body:
        starts.extend(m.start() for m in _CONNECT_ANCHOR.finditer(body))
        starts.sort()
    return starts


# Cheap filter for analyze: a line none of whose words can start a meaningful message
# costs part of one regex scan over its block and nothing else.  Every anchor above,
# every error-level envelope and every exception line contains one of these keywords
# (tests/test_prefilter.py checks that on all fixtures and the corpus).  Keywords start
# with a capital or punctuation (rare in training output) and are grouped by first
# character, which makes the scan about 1.5x faster than a flat alternation.  Every
# position holding a keyword's first character costs a branch attempt, so no keyword
# starts with a character training output is full of: ".. " (nccl-tests failures, which
# also say "Test ") made every decimal point a candidate, "Interrupt" every capital I.
KEYWORDS = (
    "NCCL", "CCOM", "NET/", "Bootstrap", "Watchdog", "Caught", "Timeout", "Timed", "Exception", "Error", "ERROR",
    "FATAL", "CRITICAL", "WARN", "CUDA", "Cuda", "ECC", "Xid", "NVRM", "GPU has", "Traceback", 'File "',
    "Root Cause", "Failures:", "Failed", "Call to", "Connect", "Accept", "Attribute", "Mismatched", "Duplicate",
    "Multiple Ranks", "Signal", "Socket", "The ", "No socket", "Received", "Detected", "ProcessGroupNCCL", "Work",
    "Using network", "Test ", "[E", "#", "Got completion", "Heartbeat", "Environment variable", "AF_INET", "Rank",
    "] INFO", "] started", "] finished", "] joined", "[Errno", "KeyboardInterrupt", "To our",
)
KEYWORD_RX = (r"E\d{4} ", r"\[rank\d+\]:\[E")

PREFILTER = re.compile(first_char_trie(tuple(re.escape(k) for k in KEYWORDS) + KEYWORD_RX))
STEP_START = re.compile("|".join(STEP_PATTERNS))
