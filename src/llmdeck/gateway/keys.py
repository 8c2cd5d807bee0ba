"""API keys for the gateway: made once, shown once, stored only as salted HMAC-SHA256 digests.

The keys file is JSON, mode 0600 in a 0700 folder; a file others can read is refused (as ssh does).
A presented key is checked against every stored digest with ``hmac.compare_digest`` (no early exit, so
the time does not depend on which key or how many leading characters matched). Keys are never logged:
only their names appear in logs, metrics and ``keys list``.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError, ValidationInfo, field_validator, model_validator

from llmdeck.errors import AlreadyExistsError, ConfigError, NotRunningError, UsageError
from llmdeck.util.atomic import atomic_write_text
from llmdeck.util.localfile import (
    FileTooLargeError,
    NotRegularFileError,
    check_regular,
    ensure_dir,
    read_regular_text,
)
from llmdeck.util.shellquote import quote

KEYS_SCHEMA_VERSION = 1
KEY_PREFIX = "sk-llmdeck-"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,62}$")

# a minute's requests one key may make: a million is 16,667 a second, past any one box
MAX_RPM = 1_000_000
LOCK_S = 30.0  # a create or revoke holds the keys file's folder for milliseconds


class KeyRecord(BaseModel):
    """One key as stored: its name, limits and digest; never the key itself."""

    name: str
    salt: str = Field(repr=False)
    digest: str = Field(repr=False)
    hint: str = Field(description="The key's first characters, to recognise it.")
    models: list[str] | None = None
    rpm: int | None = Field(None, ge=1, le=MAX_RPM)
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    @field_validator("rpm", mode="before")
    @classmethod
    def _older_rpm(cls, value: object) -> object:
        """An llmdeck before 2026-12-05 took any --rpm from 1 up (100000000 is in such files): read as the
        highest limit kept now, the same in effect; the whole file had been refused, every key with it."""
        return MAX_RPM if type(value) is int and value > MAX_RPM else value

    @field_validator("salt", "digest")
    @classmethod
    def _hex(cls, value: str, info: ValidationInfo) -> str:
        """Hex as `keys create` writes it (a salt of 16 bytes, an HMAC-SHA256 of 32): another value had
        been read, and every request with a key then answered 500 (``bytes.fromhex``)."""
        size = 64 if info.field_name == "digest" else None
        if not re.fullmatch(r"(?:[0-9a-f]{2})+", value) or (size and len(value) != size):
            raise ValueError("not the hex digits `llmdeck keys create` writes")
        return value

    def public(self) -> dict[str, object]:
        """What `keys list` shows: no salt, no digest."""
        return self.model_dump(mode="json", exclude={"salt", "digest"})


class KeysFile(BaseModel):
    schema_version: int = KEYS_SCHEMA_VERSION
    keys: list[KeyRecord] = Field(..., description="Every file llmdeck writes has it: `{}` is none of its.")

    @model_validator(mode="after")
    def _known_and_unique(self) -> KeysFile:
        """A newer llmdeck's file is not read as this one's (nor written back in this one's form), and a
        name stands for one key: `keys revoke NAME` must end every key of that name."""
        if self.schema_version != KEYS_SCHEMA_VERSION:
            raise ValueError(
                f"its schema_version is {self.schema_version}; this llmdeck reads {KEYS_SCHEMA_VERSION}"
            )
        names = [k.name for k in self.keys]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"it names {', '.join(map(repr, twice))} more than once")
        return self


def digest_key(secret: str, salt: str) -> str:
    return hmac.new(bytes.fromhex(salt), secret.encode("utf-8"), hashlib.sha256).hexdigest()


def new_secret() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def _not_keys(path: Path, why: str) -> ConfigError:
    return ConfigError(
        f"The keys file {path} is not a llmdeck keys file: {why}.",
        hint="Point keys_file at a file made by `llmdeck keys create`, or move this one away.",
    )


def _newer_version(path: Path, text: str) -> ConfigError | None:
    """The error for a keys file a newer llmdeck wrote (its schema_version above this one's), else None:
    it had been called "not a llmdeck keys file", with the advice to move it away (every key with it)."""
    from llmdeck.util.jsonsafe import loads

    try:
        found = loads(text).get("schema_version")
    except (ValueError, AttributeError):  # not JSON, not an object: the caller's message says so
        return None
    if type(found) is not int or found <= KEYS_SCHEMA_VERSION:
        return None
    return ConfigError(
        f"The keys file {path} has schema_version {found}: a newer llmdeck wrote it; this one reads "
        f"{KEYS_SCHEMA_VERSION}.",
        hint="Upgrade llmdeck (the version that wrote it) to use these keys; keep the file, it holds them.",
    )


class KeyStore:
    """The keys file: create, list, revoke, verify."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def exists(self) -> bool:
        return self.path.exists()

    def load(self) -> KeysFile:
        if not self.path.exists():
            return KeysFile(keys=[])
        try:  # a folder, a FIFO or a device is refused before it is opened
            check_regular(self.path)
            text = read_regular_text(self.path)
        except UnicodeDecodeError as exc:
            raise _not_keys(self.path, f"it is not UTF-8 text (byte {exc.start})") from exc
        except (NotRegularFileError, FileTooLargeError) as exc:
            raise ConfigError(
                f"The keys file {self.path} cannot be used: {exc.strerror}.",
                hint="Point --keys-file (or the gateway's keys_file) at a file `llmdeck keys create` made, "
                "or at a path where none exists yet.",
            ) from exc
        try:  # what it holds first: `chmod 600` is no advice for a file that is none of llmdeck's
            data = KeysFile.model_validate_json(text)
        except ValidationError as exc:
            if (newer := _newer_version(self.path, text)) is not None:
                raise newer from exc
            first = exc.errors()[0]
            msg = str(first["msg"]).removeprefix("Value error, ")
            where = ".".join(str(x) for x in first.get("loc", ()))
            why = (
                "it is not JSON"
                if first.get("type") == "json_invalid"
                else f"{where}: {msg}"
                if where
                else msg
            )
            raise _not_keys(self.path, why) from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise _not_keys(self.path, "it is not JSON") from exc
        _refuse_loose_mode(self.path)
        return data

    def _changing(self, *, make: bool) -> contextlib.AbstractContextManager[None]:
        """One `keys create`/`revoke` at a time on this file, from its read to its write: two at once had
        each written back what it read plus its own change, one created key lost (though printed) or a
        revoked one back. The lock is the keys file's folder (``make``: made 0700 first), so nothing lies
        beside the file."""
        from llmdeck.util.atomic import resolve_target
        from llmdeck.util.filelock import folder_lock

        if make:
            ensure_dir(self.path.parent, 0o700)  # a file in the way is a UsageError naming it
        return folder_lock(resolve_target(self.path).parent, timeout_s=LOCK_S, what="`llmdeck keys` command")

    def save(self, data: KeysFile) -> None:
        ensure_dir(self.path.parent, 0o700)  # a file in the way is a UsageError naming it
        atomic_write_text(self.path, data.model_dump_json(indent=2) + "\n")  # mkstemp: mode 0600
        os.chmod(self.path, 0o600)

    def create(self, name: str, *, models: list[str] | None = None, rpm: int | None = None) -> str:
        """Store a new key and return it (the only time it exists in clear).

        ``models=None`` allows every alias; an empty list is refused (it would read as "all")."""
        if not NAME_RE.match(name):
            raise UsageError(
                f"{name!r} is not a key name.",
                hint="Use letters, digits, '.', '_', '@' and '-' (max 63), e.g. alice or ci-bot.",
            )
        if rpm is not None and not 1 <= rpm <= MAX_RPM:
            raise UsageError(
                f"--rpm {rpm} is not a limit a gateway can keep: it is 1 to {MAX_RPM:,} requests a minute.",
                hint="Leave it out for no limit.",
            )
        if models is not None:
            models = parse_models(",".join(models))
        with self._changing(make=True):
            return self._add(name, models, rpm)

    def _add(self, name: str, models: list[str] | None, rpm: int | None) -> str:
        data = self.load()
        if any(k.name == name for k in data.keys):
            raise AlreadyExistsError(
                f"A key named {name!r} exists already in {self.path}.",
                hint=f"Revoke it first (`llmdeck keys revoke {name}`) or choose another name.",
            )
        secret = new_secret()
        salt = secrets.token_hex(16)
        record = KeyRecord(
            name=name,
            salt=salt,
            digest=digest_key(secret, salt),
            hint=secret[: len(KEY_PREFIX) + 4],
            models=models,
            rpm=rpm,
        )
        data.keys.append(record)
        self.save(data)
        return secret

    def revoke(self, name: str) -> None:
        with self._changing(make=False):
            self._remove(name)

    def _remove(self, name: str) -> None:
        data = self.load()
        kept = [k for k in data.keys if k.name != name]
        if len(kept) == len(data.keys):
            known = ", ".join(k.name for k in data.keys) or "none"
            what = f" (known: {known})" if self.path.exists() else ": that file does not exist"
            raise NotRunningError(
                f"No key named {name!r} in {self.path}{what}.",
                hint="Give a name `llmdeck keys list` shows, or the gateway's keys file with --keys-file.",
            )
        data.keys = kept
        self.save(data)


def alias_problem(alias: str) -> str | None:
    """Why ``alias`` is no model alias, or None. An alias is a name clients send and `gateway status`
    shows: no control characters (an escape sequence would rewrite the terminal it is shown on), no
    spaces around it, 200 characters at most. One rule for routes' ``model:`` and keys' ``--models``."""
    if alias != alias.strip() or len(alias) > 200 or any(ord(c) < 32 or ord(c) == 127 for c in alias):
        return (
            f"the alias {alias[:60]!r} is no name: use up to 200 printable characters with no control "
            "characters and no spaces around it (e.g. qwen-fast)"
        )
    return None


def parse_models(text: str | None) -> list[str] | None:
    """``--models a,b``: the aliases a key may use; None (the option left out) allows all.

    A value with no alias in it (``''``, ``' , '``) is refused: stored as "no list" it would allow every
    model, the opposite of what a restriction asks for."""
    if text is None:
        return None
    models = [m.strip() for m in text.split(",") if m.strip()]
    if not models:
        raise UsageError(
            f"--models {text!r} names no model.",
            hint="Name at least one alias (--models qwen-fast,qwen-think), or leave --models out to allow "
            "every model.",
        )
    for alias in models:
        if (why := alias_problem(alias)) is not None:
            raise UsageError(f"--models: {why}.", hint="Name the aliases of the gateway config's routes.")
    return models


def verify(secret: str, keys: list[KeyRecord]) -> KeyRecord | None:
    """The key ``secret`` belongs to, checked in constant time against every stored digest."""
    found: KeyRecord | None = None
    presented = secret.encode("utf-8")
    for record in keys:
        candidate = hmac.new(bytes.fromhex(record.salt), presented, hashlib.sha256).hexdigest()
        if hmac.compare_digest(candidate, record.digest) and found is None:
            found = record
    return found


def _refuse_loose_mode(path: Path) -> None:
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise ConfigError(
            f"The keys file {path} can be read by other users (mode {mode:04o}).",
            hint=f"Run `chmod 600 {quote(str(path))}`; llmdeck writes it 0600.",
        )


class KeyRing:
    """The gateway's view of the keys file: re-read when it changes (checked at most once a second).

    Keys are required once the file exists: at start, or from the re-read that finds it made (the first
    `llmdeck keys create` on an open gateway had left it open till a restart, which nothing said). A
    file deleted later leaves no key valid (the gateway never falls open). A file made unreadable later
    keeps the keys last read, with a warning.
    """

    def __init__(self, store: KeyStore) -> None:
        import time

        self.store = store
        self._clock = time.monotonic
        self._checked = -1.0
        self._stamp: tuple[int, int, int] | None = None  # the keys file's (inode, mtime_ns, size)
        self.keys: list[KeyRecord] = []
        self.on_gone: list[Callable[[set[str]], None]] = []  # told the names a re-read found gone
        self._enabled = False
        self.refresh(force=True)

    @property
    def enabled(self) -> bool:
        """Whether keys are required: from the moment the file exists (looked at once a second at most;
        an open gateway had looked only when asked for a key, so never)."""
        self.refresh()
        return self._enabled

    def refresh(self, *, force: bool = False) -> None:
        now = self._clock()
        if not force and now - self._checked < 1.0:
            return
        self._checked = now
        try:  # the whole stamp: a keys file rewritten (a new inode) within one mtime tick is news too
            st = self.store.path.stat()
            stamp: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = None
        if stamp == self._stamp and not force:
            return
        before = {k.name for k in self.keys}
        try:
            self.keys = self.store.load().keys if stamp is not None else []
        except ConfigError as exc:
            if force:
                raise
            import logging

            logging.getLogger("llmdeck.gateway").warning("keys file not re-read: %s", exc.message)
            return
        self._stamp = stamp
        if stamp is not None and not self._enabled:
            self._enabled = True  # never off again
            if not force:
                import logging

                logging.getLogger("llmdeck.gateway").warning("keys file made: keys are required from now on")
        gone = before - {k.name for k in self.keys}  # revoked (or the file deleted: every key)
        for tell in self.on_gone if gone else ():
            tell(gone)

    def lookup(self, secret: str) -> KeyRecord | None:
        self.refresh()
        return verify(secret, self.keys)

    def labelled(self, name: str) -> bool:
        """Whether metrics may label a series with this key name: "-" (no key), or a key the file had
        at its last read (a revoked key's series left /metrics then: GatewayMetrics.forget_keys)."""
        return not self.enabled or name == "-" or any(k.name == name for k in self.keys)
