"""User-facing errors. Each carries the place it points at; the CLI prints it and exits 2."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """A place in an input file (1-based line and column), or a named origin such as a preset."""

    file: str
    line: int | None = None
    col: int | None = None

    def __str__(self) -> str:
        if self.line is None:
            return self.file
        if self.col is None:
            return f"{self.file}:{self.line}"
        return f"{self.file}:{self.line}:{self.col}"


class UserError(Exception):
    """Bad input: printed as ``location: message`` without a traceback, exit code 2."""

    def __init__(self, message: str, location: Location | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.location = location

    def __str__(self) -> str:
        return f"{self.location}: {self.message}" if self.location else self.message


class UserErrors(UserError):
    """Several independent errors found in one pass (each printed on its own line)."""

    def __init__(self, errors: list[UserError]) -> None:
        super().__init__("\n".join(str(e) for e in errors))
        self.errors = errors

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)
