"""Settings: environment variables with the ``LLMDECK_`` prefix.

Built once in ``llmdeck.cli.app`` (through :func:`load_settings`) and passed down; nothing reads
configuration at import time. A bad value is a :class:`llmdeck.errors.ConfigError` (exit 2) that
names the variable, the value and what is accepted, never a pydantic dump.
"""

from __future__ import annotations

import difflib
import os
import shlex
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, PrivateAttr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from llmdeck.errors import ConfigError
from llmdeck.util.home import home
from llmdeck.util.jsonsafe import loads as _json_loads
from llmdeck.util.redact import REDACTED, is_secret_name

ENV_PREFIX = "LLMDECK_"
MAX_CATALOG_BYTES = 1 << 20  # a user catalog is a few KB; refuse anything over 1 MiB before parsing

# What each setting accepts, for the error message (one place, next to the fields).
ACCEPTED: dict[str, str] = {
    "debug": "1 or 0 (also true/false, yes/no, on/off)",
    "port": "a whole number from 1 to 65535, e.g. 8000",
    "host": "an IP address (127.0.0.1, 0.0.0.0, ::1) or a host name (localhost, gpu-box.lan)",
    "catalog_paths": f"catalog files (*.yaml) or folders of them, separated by {os.pathsep!r}, "
    "each existing and under 1 MiB",
    "ready_timeout_s": "a number of seconds above 0 and at most 2592000 (30 days), e.g. 900",
    "docker_pull_timeout_s": "a number of seconds above 0 and at most 2592000 (30 days), e.g. 7200",
    "watchdog_floor_gib": "a number of GiB, 0 or more, e.g. 1.5 (0 turns the floor off)",
    "unified_reserve_gib": "a number of GiB, 0 or more, e.g. 2 (kept free for the OS and the desktop)",
    "api_key": "the key the server was started with (--api-key)",
    **{
        f: "a folder, or a path where one can be made (no file in the way)"
        for f in ("state_dir", "cache_dir", "models_dir", "results_dir")
    },
}


def _xdg(var: str, fallback: str) -> Path:
    """``$var``, or ``~/fallback`` when it is unset, empty or relative: the XDG spec calls a relative
    path there invalid, to be ignored (``XDG_STATE_HOME=state`` had put llmdeck's records under
    whatever folder each command ran in, so a server started in one was not found from another)."""
    value = os.environ.get(var)
    return Path(value) if value and os.path.isabs(value) else home() / fallback


# The variable a folder setting's default is made from (else HOME), for the error when it cannot be used.
DEFAULT_FROM: dict[str, str | None] = {
    "state_dir": "XDG_STATE_HOME",
    "cache_dir": "XDG_CACHE_HOME",
    "models_dir": None,
    "results_dir": None,
}


# Set while a command that writes nothing loads the settings: a folder setting that cannot be used is
# then kept (its problem in Settings.folder_error) instead of failing the load.
_FOLDERS_LENIENT: ContextVar[bool] = ContextVar("folders_lenient", default=False)


def _cannot_make_under(folder: Path, *, must_make: bool) -> str | None:
    """Why llmdeck cannot keep its files in (or make folders under) an existing ``folder``, or None.

    A virtual file system (/proc, /sys: no blocks at all) never holds llmdeck's files; a read-only one
    or a folder without write permission only matters when a folder must still be made there (an
    existing read-only models folder is fine to read)."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    if st.f_blocks == 0:
        return "on a virtual file system (like /proc or /sys), where llmdeck cannot keep files"
    if must_make and st.f_flag & os.ST_RDONLY:
        return "on a read-only file system, so no folder can be made under it"
    if must_make and not os.access(folder, os.W_OK | os.X_OK):
        return "not writable, so no folder can be made under it"
    return None


class Settings(BaseSettings):
    """Everything llmdeck may be configured with, from ``LLMDECK_*`` variables."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    debug: bool = Field(False, description="Show tracebacks (LLMDECK_DEBUG=1).")
    state_dir: Path = Field(
        default_factory=lambda: _xdg("XDG_STATE_HOME", ".local/state") / "llmdeck",
        description="Where server records and logs live (XDG state home).",
    )
    cache_dir: Path = Field(
        default_factory=lambda: _xdg("XDG_CACHE_HOME", ".cache") / "llmdeck",
        description="Engine caches (vLLM cache root, TMPDIR for the engine).",
    )
    models_dir: Path = Field(
        default_factory=lambda: home() / ".cache" / "huggingface" / "models",
        description="Where `llmdeck fetch` puts models (seed 004's layout).",
    )
    host: str = Field("127.0.0.1", description="Default host servers bind to and clients talk to.")
    port: int = Field(8000, ge=1, le=65535, description="Default server port.")
    api_key: str | None = Field(None, description="API key sent to servers (Authorization: Bearer).")
    results_dir: Path = Field(Path("runs"), description="Where bench results go by default.")
    catalog_paths: Annotated[list[Path], NoDecode] = Field(
        default_factory=list,
        description=f"Extra catalog files or folders (user catalogs), separated by {os.pathsep!r}.",
    )
    ready_timeout_s: float = Field(
        900.0, gt=0, le=2_592_000, allow_inf_nan=False, description="How long `up` waits for readiness."
    )
    docker_pull_timeout_s: float = Field(
        7200.0,
        gt=0,
        le=2_592_000,
        allow_inf_nan=False,
        description="How long `up` (engine docker) lets `docker pull` of an image not on the host take.",
    )
    watchdog_floor_gib: float = Field(
        1.5,
        ge=0,
        allow_inf_nan=False,
        description="`up` stops the engine when MemAvailable falls below this during start-up.",
    )
    unified_reserve_gib: float = Field(
        2.0,
        ge=0,
        allow_inf_nan=False,
        description="Unified memory: what `up` leaves the OS and the desktop when it sizes the KV cache.",
    )

    @field_validator("state_dir", "cache_dir", "models_dir", "results_dir", mode="before")
    @classmethod
    def _not_empty(cls, value: Any) -> Any:
        """``LLMDECK_STATE_DIR=`` (set, but empty) had been the working folder: records, logs, caches or
        models landed wherever the command ran, and the next command elsewhere did not find them."""
        if isinstance(value, str) and not value.strip():
            raise ValueError("empty, which would mean whatever folder the command runs in")
        return value

    @field_validator("state_dir", "cache_dir", "models_dir", "results_dir")
    @classmethod
    def _folder(cls, value: Path) -> Path:
        """The folder exists, or can be made: its first existing ancestor is a folder, not a file."""
        p = value.expanduser()
        try:  # a folder above it that this user may not enter: exists() raises (it had been a crash)
            file_there = p.exists() and not p.is_dir()
            parent, dangling = p, None
            while not parent.exists() and parent != parent.parent:
                dangling = dangling or (parent if parent.is_symlink() else None)
                parent = parent.parent
        except OSError as exc:
            raise ValueError(f"{str(value)!r} cannot be looked at ({exc.strerror or exc})") from exc
        if dangling is not None:  # a loop had read as an empty state, or "is a file" when written to
            why = f"{str(dangling)!r} is a symlink that leads to no folder (a loop, or its target is gone)"
        elif file_there:
            why = f"{str(value)!r} is a file, not a folder"
        elif not parent.is_dir():  # HOME a file: nothing can be made there, nor anything read
            why = f"{str(parent)!r} is a file, so no folder can be made under it"
        else:
            said = _cannot_make_under(parent, must_make=parent != p)
            why = f"{str(parent)!r} is {said}" if said else ""
        if why and not _FOLDERS_LENIENT.get():  # a reader finds nothing recorded there, and says so
            raise ValueError(why)
        return p

    @field_validator("state_dir", "cache_dir", "models_dir")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        """Made absolute once, here: a server's record, log and cache paths must not change meaning
        with the folder a later command runs in (results_dir stays relative, like a project's runs/)."""
        return Path(os.path.abspath(value))

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        from llmdeck.util.net import bare_host, is_valid_host

        if not is_valid_host(value):
            raise ValueError("not an IP address or host name")
        return bare_host(value)

    @field_validator("api_key")
    @classmethod
    def _api_key(cls, value: str | None) -> str | None:
        from llmdeck.util.redact import api_key_problem

        why = api_key_problem(value) if value else None
        if why:
            raise ValueError(f"the key cannot be sent: {why}")
        return value

    @field_validator("catalog_paths", mode="before")
    @classmethod
    def _split_paths(cls, value: Any) -> Any:
        """``a.yaml:dir`` (os.pathsep-separated, like PATH) or a JSON list; empty parts are skipped."""
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                try:
                    paths = _json_loads(text)
                except ValueError as exc:
                    raise ValueError(f"not a JSON list of paths ({exc})") from None
                if not isinstance(paths, list) or not all(isinstance(p, str) and p for p in paths):
                    raise ValueError("not a JSON list of paths: each item must be a non-empty string")
                return paths
            return [part for part in text.split(os.pathsep) if part.strip()]
        return value

    @field_validator("catalog_paths")
    @classmethod
    def _catalogs_exist(cls, value: list[Path]) -> list[Path]:
        for path in value:
            p = path.expanduser()
            if not p.exists():
                raise ValueError(f"{str(path)!r} does not exist")
            if p.is_file() and p.stat().st_size > MAX_CATALOG_BYTES:
                raise ValueError(f"{str(path)!r} is {p.stat().st_size} bytes, over the 1 MiB limit")
        return value

    _folder_error: ConfigError | None = PrivateAttr(None)

    @property
    def folder_error(self) -> ConfigError | None:
        """Why a folder setting cannot be used, when a command that writes nothing loaded the settings
        anyway (:func:`load_settings` with ``writes=False``); None when every folder is fine."""
        return self._folder_error

    @property
    def servers_dir(self) -> Path:
        return self.state_dir / "servers"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def locks_dir(self) -> Path:
        """One writer at a time on a result file or folder (util/filelock.sole_writer)."""
        return self.state_dir / "locks"


class _DebugOnly(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")
    debug: bool = False


def settings_error(exc: ValidationError) -> ConfigError:
    """One paragraph naming each bad variable, its value and what it accepts."""
    parts = []
    fields: list[str] = []
    defaults: list[str] = []
    for err in exc.errors():
        field = str(err["loc"][0]) if err.get("loc") else "?"
        var = ENV_PREFIX + field.upper()
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if var not in os.environ and field in DEFAULT_FROM:  # a default the user never wrote
            defaults.append(var)
            said = _default_said(field, err.get("input"))
            parts.append(f"{var} is not set, and its default {said} cannot be used ({msg})")
            continue
        fields.append(field)
        raw = os.environ.get(var, err.get("input"))
        raw = REDACTED if is_secret_name(var) and raw else raw
        accepted = ACCEPTED.get(field, "a valid value")
        parts.append(f"{var}={str(raw)!r} is not valid ({msg}); it accepts {accepted}")
    hints = []
    if fields:
        hints.append("Fix or unset " + " or ".join(sorted({ENV_PREFIX + f.upper() for f in fields})) + ".")
    if defaults:
        names = ", ".join(defaults[:-1]) + (" and " if len(defaults) > 1 else "") + defaults[-1]
        hints.append(f"Set {names} to a folder you can write to (or fix HOME or XDG_*).")
    return ConfigError("; ".join(parts) + ".", hint=" ".join(hints))


def _default_said(field: str, value: object) -> str:
    """A folder setting's default as the error names it: the path, and what it was made from."""
    xdg = DEFAULT_FROM[field]
    if field == "results_dir":
        return f"{str(value)!r} (in the folder the command runs in)"
    source = f"{xdg}={os.environ[xdg]!r}" if xdg and os.environ.get(xdg) else f"HOME={str(home())!r}"
    return f"{str(value)!r} (made from {source})"


def _set_by_user(exc: ValidationError, overrides: Mapping[str, Any]) -> bool:
    """A failing setting the user gave (``LLMDECK_<NAME>``, or an override): bad input whatever the
    command (``LLMDECK_STATE_DIR=/proc/x`` stays exit 2); only a default made from HOME/XDG_* is let
    pass for a command that writes nothing."""
    for e in exc.errors():
        name = str(e["loc"][0]) if e.get("loc") else ""
        if name in overrides or f"LLMDECK_{name.upper()}" in os.environ:
            return True
    return False


def load_settings(*, writes: bool = True, **overrides: Any) -> Settings:
    """Settings from the environment (and ``overrides``); ConfigError (exit 2) when a value is bad or a
    variable's name is a near miss of a setting's (``LLMDECK_PROT`` would otherwise be ignored).

    ``writes=False`` (a command that writes nothing: doctor, status, plan): a folder that cannot be
    made or written (a read-only or missing HOME) does not stop it; the error is kept in
    ``folder_error`` (doctor reports it). Any other bad value still fails the load."""
    misspelt(os.environ)
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        error = settings_error(exc)
        if writes or _set_by_user(exc, overrides):
            raise error from None
    token = _FOLDERS_LENIENT.set(True)
    try:
        settings = Settings(**overrides)
    except ValidationError:
        raise error from None
    finally:
        _FOLDERS_LENIENT.reset(token)
    settings._folder_error = error
    return settings


# LLMDECK_ names read outside the settings: the eval agents' key and cache home, the test suite's
# switches; and any LLMDECK_<PROVIDER>_API_KEY (the variable ``connect`` names for a client's key).
OTHER_NAMES = frozenset(
    {"EVAL_API_KEY", "EVAL_CACHE_HOME", "SKIP_INTEGRATION", "TEST_MARK", "KEEP_GATEWAY_LOG", "UI_SCREENSHOT"}
)


def misspelt(environ: Mapping[str, str]) -> None:
    """ConfigError (exit 2) for an ``LLMDECK_*`` variable no part of llmdeck reads whose name is close to
    a setting's; other unknown names stay the user's own business."""
    fields = sorted(f.upper() for f in Settings.model_fields)
    bad = []
    for name in sorted(environ):
        rest = name.upper().removeprefix(ENV_PREFIX)
        if rest == name.upper() or rest in fields or rest in OTHER_NAMES or rest.endswith("_API_KEY"):
            continue
        near = difflib.get_close_matches(rest, fields, n=1, cutoff=0.7)
        if near:
            bad.append((name, ENV_PREFIX + near[0]))
    if bad:
        said = "; ".join(f"{name} is not a setting llmdeck reads (did you mean {to}?)" for name, to in bad)
        raise ConfigError(
            f"{said}. A misspelt variable would be ignored and the default used instead.",
            hint="Rename it, or unset it (`unset " + " ".join(shlex.quote(n) for n, _ in bad) + "`). "
            "docs/settings.md lists the settings.",
        )


def debug_enabled() -> bool:
    """LLMDECK_DEBUG through the settings; False when it is unset or not a valid flag."""
    try:
        return _DebugOnly().debug
    except ValidationError:
        return False
