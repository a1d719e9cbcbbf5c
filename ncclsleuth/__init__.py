"""ncclsleuth: reads the logs of a multi-node GPU job and says why it failed or is slow."""

__version__ = "0.1.0"
