"""Errors meant for users: one line, what is wrong and what to do (the CLI prints them, exit 2)."""


class DpbenchError(Exception):
    """Base class of every error the CLI reports as one line instead of a traceback."""


class SpecError(DpbenchError):
    """An experiment YAML is invalid; the message starts with the YAML path (e.g. `algorithms[2].params.lr`)."""


class DataError(DpbenchError):
    """A data file is missing or corrupt; the message says where it looked and how to get the data."""
