"""Reading what a user runs on Ollama: ``GET /api/tags``, ``GET /api/ps``, ``POST /api/show``.

The shapes are those of Ollama's ``api/types.go`` (``ListModelResponse``, ``ProcessModelResponse``,
``ShowResponse``) and docs/api.md; tests/fixtures/ollama holds the documented answers. Every request
is bounded as a whole (a peer that accepts and never answers cannot hold the command); a URL that is
not one is exit 2, an Ollama that does not answer or answers something else is exit 1.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from pydantic import BaseModel, Field

from llmdeck.errors import EndpointError, InternalError

DEFAULT_TIMEOUT_S = 10.0
_PARAM_LINE = re.compile(r"^\s*(?:PARAMETER\s+)?([a-z_]+)\s+(.+?)\s*$")


class OllamaModelInfo(BaseModel):
    """One local Ollama model: its tags entry, what /api/show adds, and its /api/ps entry if loaded."""

    name: str
    family: str | None = None
    families: list[str] = Field(default_factory=list)
    format: str | None = None
    parameter_size: str | None = None
    quantization_level: str | None = None
    size_bytes: int | None = Field(None, description="On disk (/api/tags).")
    architecture: str | None = Field(None, description="model_info general.architecture.")
    native_context: int | None = Field(None, description="model_info <arch>.context_length.")
    num_ctx: int | None = Field(None, description="The context Ollama runs it with (parameters / ps).")
    capabilities: list[str] = Field(default_factory=list)
    has_template: bool = False
    parameters: dict[str, str] = Field(default_factory=dict, description="/api/show parameters.")
    loaded: bool = False
    loaded_bytes: int | None = Field(None, description="/api/ps size: memory it holds now.")
    loaded_vram_bytes: int | None = None
    expires_at: str | None = Field(None, description="/api/ps: when keep-alive unloads it.")
    show_error: str | None = Field(None, description="Why /api/show gave nothing, if it did not.")
    also_named: list[str] = Field(
        default_factory=list, description="The same model's other spellings in /api/tags (case aside)."
    )

    @property
    def thinks(self) -> bool:
        return "thinking" in self.capabilities

    @property
    def tools(self) -> bool:
        return "tools" in self.capabilities


class OllamaInventory(BaseModel):
    url: str
    version: str | None = None
    models: list[OllamaModelInfo] = Field(default_factory=list)

    @property
    def loaded(self) -> list[OllamaModelInfo]:
        return [m for m in self.models if m.loaded]


def _request(method: str, url: str, body: dict[str, Any] | None, limit: float) -> tuple[int, Any]:
    """(status, parsed JSON) of one request bounded as a whole; EndpointError when it fails."""
    import httpx

    from llmdeck.util.deadline import deadline_transport
    from llmdeck.util.http import IDENTITY, BodyTooLarge, NotAnswering, plain_body, read_capped
    from llmdeck.util.jsonsafe import TooDeepError, loads

    until = time.monotonic() + limit
    try:
        with (
            httpx.Client(timeout=httpx.Timeout(limit), transport=deadline_transport()) as client,
            client.stream(method, url, json=body, headers=IDENTITY) as resp,
        ):
            plain_body(resp, url, what="Ollama")
            raw = read_capped(resp.iter_bytes(), url, until=until, what="Ollama")
            status = resp.status_code
    except (NotAnswering, httpx.TimeoutException) as exc:
        raise EndpointError(
            f"Ollama at {url} did not answer within {limit:g} s.",
            hint="Check that Ollama is running (`ollama ps`), or pass its URL with --ollama.",
        ) from exc
    except BodyTooLarge:
        raise
    except httpx.HTTPError as exc:
        raise EndpointError(
            f"Cannot reach Ollama at {url} ({str(exc) or 'no reason given'}).",  # no httpx class named
            hint="Start Ollama (`ollama serve`), or pass its URL with --ollama (default "
            "http://127.0.0.1:11434).",
        ) from exc
    try:
        return status, loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        what = (
            "JSON nested deeper than any reply"
            if isinstance(exc, TooDeepError)
            else "something that is not JSON"
        )
        raise EndpointError(
            f"{url} answered HTTP {status} with {what} ({raw[:80]!r}), so it is not Ollama's API.",
            hint="Pass Ollama's own URL with --ollama (its port is 11434 unless OLLAMA_HOST says else).",
        ) from exc


def _get_object(url: str, limit: float) -> dict[str, Any]:
    status, data = _request("GET", url, None, limit)
    if status != 200 or not isinstance(data, dict):
        shown = json.dumps(data)[:200]
        raise EndpointError(
            f"{url} answered HTTP {status} {shown}, not Ollama's list of models.",
            hint="Pass Ollama's own URL with --ollama (its port is 11434 unless OLLAMA_HOST says else).",
        )
    return data


def _models_of(data: dict[str, Any], url: str) -> list[dict[str, Any]]:
    from llmdeck.runtime.tenants import GATEWAY_MARK

    if data.get(GATEWAY_MARK):
        raise EndpointError(
            f"{url} is llmdeck's gateway (it speaks Ollama's API for Ollama's clients), not Ollama: there "
            "is nothing there to migrate.",
            hint="Pass Ollama's own URL with --ollama (if the gateway holds Ollama's port, stop it first).",
        )
    models = data.get("models")
    if models is None:
        models = []
    if not isinstance(models, list) or not all(isinstance(m, dict) for m in models):
        raise EndpointError(
            f"{url} answered a `models` that is not a list of objects, so it is not Ollama's API.",
            hint="Pass Ollama's own URL with --ollama.",
        )
    return models


def parse_parameters(text: str) -> dict[str, str]:
    """/api/show ``parameters`` ("num_ctx 4096\\nstop ..."): the last value of each key."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _PARAM_LINE.match(line)
        if m:
            out[m.group(1)] = m.group(2).strip().strip('"')
    return out


def canonical(name: str) -> str:
    """Ollama's own rule: a name without a tag is ``name:latest``; case does not matter."""
    name = name.strip().lower()
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


def _int(value: Any) -> int | None:
    """A count or size Ollama gives (bytes, tokens): a whole number, never negative (``-1`` had been
    shown as "context: -1" and "-0.0 GiB while loaded")."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


class _BadField(InternalError):
    """A field of Ollama's reply that is not of the type Ollama's API gives it (``family: 5``)."""


def _text(details: dict[str, Any], key: str) -> str | None:
    """``details[key]``: a string, or None when absent or empty; _BadField when it is anything else."""
    value = details.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise _BadField(f"details.{key} is {json.dumps(value)[:60]}, not a string")
    return value


def _from_tags(entry: dict[str, Any]) -> OllamaModelInfo:
    d = entry.get("details") if isinstance(entry.get("details"), dict) else {}
    assert isinstance(d, dict)
    return OllamaModelInfo(
        name=str(entry.get("name") or entry.get("model") or "?"),
        family=_text(d, "family"),
        families=[str(f) for f in d.get("families") or [] if isinstance(f, str)],
        format=_text(d, "format"),
        parameter_size=_text(d, "parameter_size"),
        quantization_level=_text(d, "quantization_level"),
        size_bytes=_int(entry.get("size")),
    )


def _not_expected(url: str, name: str, exc: _BadField) -> EndpointError:
    return EndpointError(
        f"The Ollama server's reply at {url} is not what llmdeck expects: for the model {name!r}, {exc}.",
        hint="Check that --ollama points at Ollama itself (not a proxy or another server that rewrites "
        "its answers) and that Ollama is up to date (`ollama --version`).",
    )


def apply_show(info: OllamaModelInfo, show: dict[str, Any]) -> None:
    """What /api/show adds: architecture, native context, num_ctx, capabilities, template."""
    mi = show.get("model_info") if isinstance(show.get("model_info"), dict) else {}
    assert isinstance(mi, dict)
    arch = mi.get("general.architecture")
    info.architecture = arch if isinstance(arch, str) else None
    if info.architecture:
        info.native_context = _int(mi.get(f"{info.architecture}.context_length"))
    params = show.get("parameters")
    info.parameters = parse_parameters(params) if isinstance(params, str) else {}
    modelfile = show.get("modelfile")
    from_file = parse_parameters(modelfile) if isinstance(modelfile, str) else {}
    info.num_ctx = _int(info.parameters.get("num_ctx")) or _int(from_file.get("num_ctx")) or info.num_ctx
    caps = show.get("capabilities")
    info.capabilities = [str(c) for c in caps if isinstance(c, str)] if isinstance(caps, list) else []
    info.has_template = bool(show.get("template"))
    details = show.get("details")
    if isinstance(details, dict):  # _BadField for a field of the wrong type, as in /api/tags
        info.family = info.family or _text(details, "family")
        info.quantization_level = info.quantization_level or _text(details, "quantization_level")
        info.parameter_size = info.parameter_size or _text(details, "parameter_size")


def _one_per_model(models: list[OllamaModelInfo]) -> list[OllamaModelInfo]:
    """One entry per Ollama model: names that differ in case alone are one model to Ollama (its names are
    case-insensitive), so the later spellings join the first one's ``also_named`` (they had become two
    specs and two servers of the same weights)."""
    out: dict[str, OllamaModelInfo] = {}
    for m in models:
        first = out.setdefault(canonical(m.name), m)
        if first is not m and m.name not in (first.name, *first.also_named):
            first.also_named.append(m.name)
    return list(out.values())


def _apply_ps(models: list[OllamaModelInfo], ps: list[dict[str, Any]]) -> None:
    by_name = {canonical(m.name): m for m in models}  # ps may spell a model as another client did
    for entry in ps:
        m = by_name.get(canonical(str(entry.get("name") or entry.get("model") or "")))
        if m is None:
            continue
        m.loaded = True
        m.loaded_bytes = _int(entry.get("size"))
        m.loaded_vram_bytes = _int(entry.get("size_vram"))
        m.expires_at = entry.get("expires_at") if isinstance(entry.get("expires_at"), str) else None
        m.num_ctx = _int(entry.get("context_length")) or m.num_ctx


def read_inventory(base_url: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> OllamaInventory:
    """Every local model with its show and ps facts. ``base_url`` is parsed first (exit 2 when it
    is not an http(s) URL); an Ollama that fails is exit 1."""
    from llmdeck.util.net import parse_http_url

    url = parse_http_url(base_url, what="The Ollama URL", example="http://127.0.0.1:11434")
    url = url.removesuffix("/v1").removesuffix("/api")
    tags = _models_of(_get_object(f"{url}/api/tags", timeout_s), f"{url}/api/tags")
    models = []
    for t in tags:
        try:
            models.append(_from_tags(t))
        except _BadField as exc:
            raise _not_expected(f"{url}/api/tags", str(t.get("name") or t.get("model") or "?"), exc) from None
    models = _one_per_model(models)
    ps = _models_of(_get_object(f"{url}/api/ps", timeout_s), f"{url}/api/ps")
    silent: str | None = None
    for m in models:
        if silent is not None:  # one unanswered show is Ollama stuck: the rest would each wait as long
            m.show_error = f"not asked: /api/show failed for an earlier model ({silent})"
            continue
        try:
            status, show = _request("POST", f"{url}/api/show", {"model": m.name}, timeout_s)
        except EndpointError as exc:
            m.show_error = silent = exc.message
            continue
        if status == 200 and isinstance(show, dict):
            try:
                apply_show(m, show)
            except _BadField as exc:
                raise _not_expected(f"{url}/api/show", m.name, exc) from None
        else:
            m.show_error = f"HTTP {status}: {json.dumps(show)[:160]}"
    _apply_ps(models, ps)
    version = None
    try:
        status, ver = _request("GET", f"{url}/api/version", None, min(timeout_s, 5.0))
        if status == 200 and isinstance(ver, dict) and isinstance(ver.get("version"), str):
            version = ver["version"]
    except EndpointError:
        pass
    return OllamaInventory(url=url, version=version, models=models)
