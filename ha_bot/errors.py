"""The one base exception for user-facing errors, and its friends."""

from __future__ import annotations


class HaBotError(Exception):
    """An error the user can fix: printed as one clear message, no traceback (exit code 2)."""


class ConfigError(HaBotError):
    """A configuration problem, located by file, line and key where known."""

    def __init__(self, message: str, *, file: str = "", line: int | None = None, key: str = "") -> None:
        self.file, self.line, self.key, self.detail = file, line, key, message
        where = file
        if line is not None:
            where += f":{line}"
        if key:
            where += f": {key}" if where else key
        super().__init__(f"{where}: {message}" if where else message)


class ModelError(HaBotError):
    """A model could not be loaded, traced or counted. Reported per model; others go on."""
