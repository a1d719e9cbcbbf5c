"""Exit codes, defined once: what scripts and CI can rely on."""

EXIT_OK = 0  #: nothing at or above --fail-on
EXIT_FINDINGS = 1  #: at least one finding at or above --fail-on
EXIT_USAGE = 2  #: usage, configuration, rule error, or nothing could be analysed
