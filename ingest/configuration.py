"""Settings as the commands read them: every problem is one line, before anything is opened.

:class:`cardrag.ingest.settings.Settings` checks each value's type and range. What it cannot
check alone is checked here, by :func:`load_settings`, before a store, a server or a model is
opened: the settings file (a file, UTF-8, TOML, only known keys), values that must agree
(``k`` and ``max_fetch``), the form of what names something elsewhere (a parent store URL, a
chat model and its provider's package) and a store path that is a file. Each problem is a
:class:`~cardrag.ingest.settings.ConfigurationError` whose message names the setting, its value
and what is expected; the commands print it and exit 2.
"""

from __future__ import annotations

import difflib
import importlib.util
import re
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import ValidationError
from pydantic_settings import SettingsError

from cardrag.ingest.problems import settings_problem
from cardrag.ingest.settings import ConfigurationError, Settings, settings_file

REDIS_SCHEMES = ("redis", "rediss", "unix")
"""The URL schemes of a Redis parent store (``redis://host:port/db``)."""
_URLISH = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")
"""A value that starts like a URL (a scheme and a colon; ``C:`` is a drive, not a scheme)."""


def load_settings() -> Settings:
    """The settings in force, checked: the variables, the settings file, and how they agree.

    Raises:
        ConfigurationError: one line naming the setting (or the file), its value and what is
            expected.
    """
    path = settings_file()  # a SettingsFileError (a missing file) is one line already
    check_settings_file(path)
    try:
        settings = Settings()
    except (ValidationError, SettingsError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError(settings_problem(exc)) from None
    check_settings(settings)
    return settings


def check_settings_file(path: Path) -> None:
    """A settings file that exists is a UTF-8 TOML file whose keys are all settings.

    Example:
        >>> check_settings_file(Path("/no/such/cardrag.toml"))  # absent: the defaults
    """
    if not path.exists():
        return
    where = f"settings file {path}"
    if path.is_dir():  # /dev/null, a device, reads as the empty file it is
        raise ConfigurationError(f"{where}: is a folder, expected a TOML file")
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        msg = f"{where}: not UTF-8 text (byte {exc.start}), expected a TOML file"
        raise ConfigurationError(msg) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"{where}: not TOML ({exc})") from None
    for key in data:
        if key not in Settings.model_fields:
            close = difflib.get_close_matches(key, sorted(Settings.model_fields), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigurationError(f"{where}: {key} is not a setting{hint}")


def check_settings(settings: Settings) -> None:
    """What one value's type cannot say: values that must agree, and names of other things."""
    if settings.k > settings.max_fetch:
        msg = (
            f"CARDRAG_K={settings.k}: expected at most CARDRAG_MAX_FETCH ({settings.max_fetch}), "
            "the children fetched to find k parents"
        )
        raise ConfigurationError(msg)
    if settings.store_dir.exists() and not settings.store_dir.is_dir():
        raise ConfigurationError(f"CARDRAG_STORE_DIR={settings.store_dir} is a file, not a folder")
    if settings.parent_store is not None:
        check_parent_store(settings.parent_store)
    if settings.chroma_url is not None:
        check_chroma_url(settings.chroma_url)
    if settings.chat_model is not None:
        check_chat_model(settings.chat_model)


def check_parent_store(value: str) -> None:
    """A parent store that looks like a URL is a Redis URL with a host (or a socket path).

    Example:
        >>> check_parent_store("redis://127.0.0.1:6379/0")
        >>> try:
        ...     check_parent_store("redis:/h:6379")
        ... except ConfigurationError as exc:
        ...     print(exc)
        CARDRAG_PARENT_STORE=redis:/h:6379: expected redis://host:port/db, a folder or memory
    """
    if value == "memory" or not _URLISH.match(value) or re.match(r"^[A-Za-z]:[\\/]", value):
        return
    url = urlsplit(value)
    if url.scheme in REDIS_SCHEMES and (url.hostname or (url.scheme == "unix" and url.path)):
        return
    msg = f"CARDRAG_PARENT_STORE={value}: expected redis://host:port/db, a folder or memory"
    raise ConfigurationError(msg)


def check_chroma_url(value: str) -> None:
    """A Chroma server's URL: ``http(s)://host[:port]``, checked before any command opens it.

    Example:
        >>> check_chroma_url("http://127.0.0.1:8000")
        >>> try:
        ...     check_chroma_url("http://[::1")
        ... except ConfigurationError as exc:
        ...     print(exc)
        CARDRAG_CHROMA_URL=http://[::1: expected http://host:port
    """
    try:
        url = urlsplit(value)
        ok = url.scheme in ("http", "https") and bool(url.hostname) and (url.port or 1) > 0
    except ValueError:  # "Invalid IPv6 URL", a port that is not a number
        ok = False
    if not ok:
        raise ConfigurationError(f"CARDRAG_CHROMA_URL={value}: expected http://host:port")


def check_chat_model(value: str) -> None:
    """A chat model names its provider (``provider:model``) and the provider's package is here.

    Example:
        >>> try:
        ...     check_chat_model("openai-gpt-4o")
        ... except ConfigurationError as exc:
        ...     print(exc)
        CARDRAG_CHAT_MODEL=openai-gpt-4o: expected provider:model (openai:gpt-4o)
    """
    provider, _, model = value.partition(":")
    if not provider or not model:
        msg = f"CARDRAG_CHAT_MODEL={value}: expected provider:model (openai:gpt-4o)"
        raise ConfigurationError(msg)
    providers = chat_providers()
    if providers is None:  # langchain is not installed: init_chat_model could not run either
        msg = f"CARDRAG_CHAT_MODEL={value}: needs the app (pip install 'cardrag[app]')"
        raise ConfigurationError(msg)
    if provider not in providers:
        known = ", ".join(sorted(providers))
        raise ConfigurationError(
            f"CARDRAG_CHAT_MODEL={value}: unknown provider {provider!r}; known: {known}"
        )
    package = providers[provider].split(".")[0]
    if importlib.util.find_spec(package) is None:
        msg = (
            f"CARDRAG_CHAT_MODEL={value}: needs {package} (pip install {package.replace('_', '-')})"
        )
        raise ConfigurationError(msg)


def chat_providers() -> dict[str, str] | None:
    """``init_chat_model``'s providers and the module each needs (None without langchain)."""
    try:
        from langchain.chat_models import base
    except ImportError:
        return None
    builtin = getattr(base, "_BUILTIN_PROVIDERS", {})
    return {name: spec[0] for name, spec in builtin.items()}
