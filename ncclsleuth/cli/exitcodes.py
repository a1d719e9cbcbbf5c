"""Exit codes, defined once: what scripts and CI can rely on."""

EXIT_OK = 0  #: nothing at or above --fail-on
EXIT_FINDINGS = 1  #: at least one finding at or above --fail-on
EXIT_USAGE = 2  #: usage, configuration, rule error, or nothing could be analysed
EXIT_NOT_A_LOG = 3  #: the inputs hold no line of NCCL, PyTorch distributed or nccl-tests
