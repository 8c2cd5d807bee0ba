"""The launch spec: everything needed to start one vLLM server, as data.

``llmdeck plan`` writes one (``--spec-out``), ``llmdeck up`` consumes one (``--spec``), and the
engine modules turn it into an argv. Versioned: ``schema_version`` changes on breaking edits.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from llmdeck.errors import UsageError
from llmdeck.formats.launch_spec import EngineKind as EngineKind  # the engines a spec may name
from llmdeck.formats.launch_spec import read_launch_spec
from llmdeck.util.names import NAME_RULE, is_valid_server_name

LAUNCH_SPEC_SCHEMA_VERSION = 1


def _image_name(value: str) -> str:
    """An image reference: one printable word that docker cannot take for an option. It is `docker
    run`'s one positional before the command: ``-v/:/x`` had become a mount of the host's / (and the
    next word the image)."""
    if value.startswith("-") or not value.isprintable() or " " in value:
        raise ValueError(f"{value!r} is not an image name: give e.g. vllm/vllm-openai:v0.22.0")
    return value


ImageName = Annotated[str, AfterValidator(_image_name)]


class LaunchSpec(BaseModel):
    """One server to start: which engine, which model, which flags."""

    model_config = ConfigDict(extra="forbid")  # a misspelt field (vllm_arg) is named, not dropped

    schema_version: int = LAUNCH_SPEC_SCHEMA_VERSION
    name: str = Field("default", description="Server name, unique on this machine.")
    engine: EngineKind = "cpu"
    model: str = Field(..., description="Local model folder, or a Hugging Face repo id.")
    served_model_name: str | None = None
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    vllm_args: list[str] = Field(default_factory=list, description="Extra `vllm serve` flags.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables.")
    python: str | None = Field(None, description="venv/cpu engines: the Python that has vLLM.")
    image: ImageName | None = Field(None, description="docker engine: the image.")
    hf_cache: str | None = Field(None, description="docker engine: host HF cache mounted in the container.")
    restart_policy: str | None = Field("unless-stopped", description="docker engine: --restart policy.")
    compile_cache: str | None = Field(
        None,
        description="docker engine: a host folder for the engine's compile caches (torch.compile, "
        "Triton with its autotuning, DeepGEMM), mounted so that the next container reuses them.",
    )

    @field_validator("model")
    @classmethod
    def _model_ok(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("it is empty; give a local model folder or a Hugging Face repo id")
        return value

    @field_validator("env")
    @classmethod
    def _env_ok(cls, env: dict[str, str]) -> dict[str, str]:
        for name in env:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"{name!r} is not an environment variable name (letters, digits and _)")
        return env

    @model_validator(mode="after")
    def _no_nul(self) -> LaunchSpec:
        """A NUL byte cannot be in a process's arguments or environment (it had died in Popen)."""
        texts = [self.model, self.python, self.image, self.hf_cache, *self.vllm_args, *self.env.values()]
        if any(t and "\x00" in t for t in texts):
            raise ValueError(
                "a value holds a NUL byte (\\x00), which no command line or environment can carry"
            )
        return self

    @field_validator("compile_cache")
    @classmethod
    def _cache_ok(cls, value: str | None) -> str | None:
        if value is not None and not Path(value).is_absolute():
            raise ValueError(f"compile_cache {value!r} must be an absolute path (docker mounts it)")
        return value

    @field_validator("served_model_name")
    @classmethod
    def _served_name_ok(cls, value: str | None) -> str | None:
        """What clients send as "model": a line break or an escape code in it had started a server whose
        name split `up`'s, `status`'s and every error's lines (and no client config could hold it)."""
        if value is not None and (
            not value.strip() or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in value)
        ):
            raise ValueError(f"{value!r} is no model name: write printable characters, e.g. qwen-coder")
        return value

    @field_validator("name")
    @classmethod
    def _name_ok(cls, value: str) -> str:
        if not is_valid_server_name(value):
            raise ValueError(f"server names use {NAME_RULE}")
        return value

    @field_validator("host")
    @classmethod
    def _host_ok(cls, value: str) -> str:
        from llmdeck.util.net import HOST_ACCEPTED, bare_host, is_valid_host

        if not is_valid_host(value):
            raise ValueError(f"{value!r} is not a host; use {HOST_ACCEPTED}")
        return bare_host(value)

    @property
    def effective_served_name(self) -> str:
        if self.served_model_name:
            return self.served_model_name
        return self.model.rstrip("/").split("/")[-1] or self.model


def read_spec_file(path: Path) -> LaunchSpec:
    """A launch spec written by `llmdeck plan --spec-out` (exit 2 when missing, unreadable or invalid)."""
    return read_launch_spec(path, LaunchSpec, LAUNCH_SPEC_SCHEMA_VERSION)


def build_spec(
    base: LaunchSpec | None,
    *,
    overrides: dict[str, Any],
    extra_args: list[str],
    defaults: dict[str, Any],
) -> LaunchSpec:
    """A spec from an optional base (a spec file), the options given (None = not given), extra
    `vllm serve` flags appended, and defaults for what neither sets. Bad values exit 2."""
    data: dict[str, Any] = base.model_dump() if base is not None else {}
    if base is None and overrides.get("model") is None:
        raise UsageError(
            "Nothing to start: give --model DIR (or a repo id) or --spec FILE.",
            hint="Example: llmdeck up --model ./tiny --port 8000",
        )
    extra_args, overrides = fold_spec_flags(extra_args, overrides)
    data.update({k: v for k, v in overrides.items() if v is not None})
    for key, value in defaults.items():
        data.setdefault(key, value)
    if extra_args:
        data["vllm_args"] = [*data.get("vllm_args", []), *extra_args]
    try:
        return LaunchSpec.model_validate(data)
    except ValidationError as exc:
        raise invalid_spec(exc, flags=set(overrides), hint="See `llmdeck up --help`.") from exc


def invalid_spec(exc: ValidationError, *, flags: set[str], hint: str) -> UsageError:
    """A spec's first bad value in words (exit 2): ``--served-model-name`` for a field given as an option
    (``flags``: those fields), the field's name otherwise."""
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"])
    msg = str(err["msg"]).removeprefix("Value error, ")
    flag = f"--{field.replace('_', '-')}" if field in flags else field
    return UsageError(f"Invalid {flag} {err.get('input')!r}: {msg}.", hint=hint)


SPEC_FIELDS = {
    "--model": "model",
    "--served-model-name": "served_model_name",
    "--host": "host",
    "--port": "port",
}
"""The `vllm serve` flags llmdeck writes itself from the spec's fields (vLLM obeys the last one given)."""


def fold_spec_flags(extra_args: list[str], overrides: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """``-- --served-model-name X`` (or ``--port``, ``--host``, ``--model``) sets the spec's field, as
    `llmdeck plan` does: appended after llmdeck's own, vLLM served under X while the record, `connect`
    and the gateway kept the folder's name (and a port other than the one llmdeck waited on)."""
    args, fields = [], dict(overrides)
    i = 0
    while i < len(extra_args):
        flag, eq, value = extra_args[i].partition("=")
        field = SPEC_FIELDS.get(flag)
        if field is None or (not eq and i + 1 >= len(extra_args)):
            args.append(extra_args[i])
            i += 1
            continue
        if not eq:
            value, i = extra_args[i + 1], i + 1
        i += 1
        if i < len(extra_args) and not extra_args[i].startswith("-"):  # vLLM's --served-model-name A B
            raise UsageError(
                f"{flag} is given several values after `--` ({value!r}, {extra_args[i]!r}); llmdeck "
                "records one per server.",
                hint="Give one; for more names put the gateway in front (a route per name, "
                "`llmdeck gateway up`).",
            )
        given = fields.get(field)
        if given is not None and str(given) != value:
            raise UsageError(
                f"{flag} is given twice: {given!r} before `--` and {value!r} after it.",
                hint=f"Give {flag} once.",
            )
        fields[field] = value
    return args, fields


def write_spec_file(path: Path, spec: LaunchSpec) -> list[str]:
    """Write ``spec`` for `llmdeck up --spec` (atomically) without its secrets; returns the names of
    the variables that were left out (``--api-key X`` -> ``VLLM_API_KEY``), to pass at start time."""
    from llmdeck.engines.secrets import split_secrets
    from llmdeck.util.atomic import atomic_write_json
    from llmdeck.util.owned import json_has_keys, refuse_foreign_file

    refuse_foreign_file(path, "launch spec", json_has_keys("schema_version", "engine", "model"))
    clean, secrets = split_secrets(spec)
    atomic_write_json(path, clean)
    return sorted(secrets)
