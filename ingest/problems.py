"""What went wrong, said so a user can act on it: a bad setting, a full disk."""

from __future__ import annotations

import errno
import re

from pydantic import ValidationError
from pydantic_settings import SettingsError

from cardrag.ingest.settings import SettingsFileError, settings_file


def settings_problem(exc: Exception) -> str:
    """One line naming each bad ``CARDRAG_*`` setting (or the settings file) and why.

    Example:
        >>> from pydantic import ValidationError
        >>> from cardrag.ingest.settings import Settings
        >>> try:
        ...     Settings(k=0)
        ... except ValidationError as exc:
        ...     print(settings_problem(exc))
        CARDRAG_K=0: Input should be greater than or equal to 1
    """
    if isinstance(exc, SettingsFileError):
        return str(exc)
    if isinstance(exc, SettingsError):  # a value that is not even JSON where a list is expected
        field = re.search(r'field "(\w+)"', str(exc))
        name = f"CARDRAG_{field.group(1).upper()}" if field else "a CARDRAG_* variable"
        return f'{name}: cannot be read (a list is written as JSON: ["pt", "es"])'

    if isinstance(exc, ValidationError):
        parts = []
        for error in exc.errors():
            where = ".".join(str(x) for x in error["loc"])
            name = f"CARDRAG_{where.upper()}" if where else "settings"
            value = f"={error['input']}" if where and not isinstance(error["input"], dict) else ""
            parts.append(f"{name}{value}: {error['msg']}")
        return "; ".join(parts)
    return f"settings file {settings_file()}: {exc}"


DISK_FULL = ("No space left on device", "database or disk is full")
"""What a full disk says, through Python (``ENOSPC``) or through SQLite inside Chroma."""


def disk_full(exc: BaseException) -> bool:
    """Whether an error, or one it was raised from, says the disk is full.

    Example:
        >>> disk_full(RuntimeError("write failed")), disk_full(OSError(28, "No space left"))
        (False, True)
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno == errno.ENOSPC:
            return True
        if any(marker in str(current) for marker in DISK_FULL):
            return True
        current = current.__cause__ or current.__context__
    return False
