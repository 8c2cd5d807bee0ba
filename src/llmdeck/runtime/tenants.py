"""Other tenants of the box: Ollama models, other vLLM / llama.cpp servers (GPU processes: runtime.host).

Seed 000 lost hours restarting vLLM into memory that Ollama (or an old vLLM) still held. These
functions find them and say how to free the memory; :mod:`llmdeck.runtime.preflight` turns them
into findings.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, Field

from llmdeck.engines.argv import flag_value
from llmdeck.errors import EndpointError
from llmdeck.runtime.host import GpuInfo as GpuInfo  # re-exported: GPUs live in runtime.host now
from llmdeck.runtime.host import GpuProcess as GpuProcess
from llmdeck.runtime.host import NvmlReport as NvmlReport
from llmdeck.runtime.host import nvml_snapshot as nvml_snapshot

OLLAMA_URL = "http://127.0.0.1:11434"
# in what llmdeck's gateway answers on Ollama's API (gateway/ollama_app.py): it is no Ollama to count or
# unload (its models are llmdeck's own, started on Ollama's port for Ollama's clients)
GATEWAY_MARK = "llmdeck_gateway"


# ---- Ollama ---------------------------------------------------------------------------------


class OllamaModel(BaseModel):
    """One entry of Ollama's ``GET /api/ps`` (docs.ollama.com/api/ps)."""

    name: str
    model: str = ""
    size: int = Field(0, description="Bytes in memory (RAM + VRAM)")
    size_vram: int = Field(0, description="Bytes of it in GPU memory")
    expires_at: str | None = None
    context_length: int | None = None
    parameter_size: str | None = None
    quantization_level: str | None = None


class OllamaStatus(BaseModel):
    url: str
    reachable: bool
    models: list[OllamaModel] = Field(default_factory=list)
    error: str | None = None

    @property
    def total_bytes(self) -> int:
        return sum(m.size for m in self.models)


def _count(value: Any) -> int | None:
    """A size or count from Ollama: a whole number, never negative; anything else (a list, text, -1) is
    unknown. ``int(m.get("size"))`` on ``[1]`` had been a TypeError that ended doctor and preflight."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def parse_ollama_ps(data: Any) -> list[OllamaModel]:
    """Parse the JSON body of ``GET /api/ps``; a field of the wrong type is unknown, not an error."""
    models = data.get("models") if isinstance(data, dict) else None
    out: list[OllamaModel] = []
    for m in models if isinstance(models, list) else []:
        if not isinstance(m, dict):
            continue
        given = m.get("details")
        details: dict[str, Any] = given if isinstance(given, dict) else {}
        out.append(
            OllamaModel(
                name=str(m.get("name") or m.get("model") or "?"),
                model=str(m.get("model") or m.get("name") or ""),
                size=_count(m.get("size")) or 0,
                size_vram=_count(m.get("size_vram")) or 0,
                expires_at=_text(m.get("expires_at")),
                context_length=_count(m.get("context_length")),
                parameter_size=_text(details.get("parameter_size")),
                quantization_level=_text(details.get("quantization_level")),
            )
        )
    return out


def ollama_ps(base_url: str = OLLAMA_URL, *, timeout_s: float = 1.5) -> OllamaStatus:
    """Which models Ollama holds in memory now. Unreachable Ollama -> ``reachable=False``."""
    import httpx

    from llmdeck.util.http import BodyTooLarge, NotAnswering, Redirected, bounded_get
    from llmdeck.util.jsonsafe import loads

    url = base_url.rstrip("/")
    try:  # bounded as a whole: whatever trickles on Ollama's port cannot hold doctor or preflight
        status, body = bounded_get(f"{url}/api/ps", limit=timeout_s)
        if status != 200:
            raise ValueError(f"HTTP {status}")
        data = loads(body)
        if isinstance(data, dict) and data.get(GATEWAY_MARK):
            return OllamaStatus(url=url, reachable=False, error="llmdeck's gateway answers there, not Ollama")
        return OllamaStatus(url=url, reachable=True, models=parse_ollama_ps(data))
    except (httpx.HTTPError, ValueError, NotAnswering, BodyTooLarge, Redirected) as exc:
        return OllamaStatus(url=url, reachable=False, error=f"{exc.__class__.__name__}: {exc}")


def ollama_unload_command(model: str, base_url: str = OLLAMA_URL) -> str:
    """The shell command that unloads ``model`` (``keep_alive: 0``)."""
    import json

    body = json.dumps({"model": model, "keep_alive": 0})
    url = shlex.quote(base_url.rstrip("/") + "/api/generate")
    return f"curl -s -X POST {url} -d {shlex.quote(body)}"


def ollama_unload(model: str, base_url: str = OLLAMA_URL, *, timeout_s: float = 30.0) -> None:
    """Ask Ollama to unload ``model`` now (``POST /api/generate`` with ``keep_alive: 0``)."""
    import httpx

    from llmdeck.util.deadline import deadline_transport
    from llmdeck.util.http import IDENTITY, BodyTooLarge, plain_body, read_capped

    url = base_url.rstrip("/")
    body = {"model": model, "keep_alive": 0}
    try:  # bounded as a whole and capped: whatever trickles or streams on Ollama's port cannot hold restart
        with (
            httpx.Client(timeout=timeout_s, transport=deadline_transport()) as client,
            client.stream("POST", f"{url}/api/generate", json=body, headers=IDENTITY) as resp,
        ):
            resp.raise_for_status()
            plain_body(resp, url, what="Ollama")
            read_capped(resp.iter_bytes(), url, what="Ollama")
    except (httpx.HTTPError, BodyTooLarge) as exc:
        raise EndpointError(
            f"Ollama at {url} did not unload {model!r} ({str(exc) or 'no reason given'}).",
            hint=f"Try by hand: {ollama_unload_command(model, url)}  "
            f"(or `ollama stop {shlex.quote(model)}`).",
        ) from exc


def ollama_unload_all(base_url: str = OLLAMA_URL) -> list[str]:
    """Unload every model Ollama holds; returns their names."""
    status = ollama_ps(base_url)
    for m in status.models:
        ollama_unload(m.name, base_url)
    return [m.name for m in status.models]


# ---- other inference servers (processes) ----------------------------------------------------

ServerKind = Literal["vllm", "llama.cpp", "sglang"]


class InferenceProcess(BaseModel):
    """A running inference server found among the processes."""

    pid: int
    kind: ServerKind
    port: int | None = None
    model: str | None = None
    rss_bytes: int | None = None
    cmdline: str = ""


def classify_cmdline(argv: list[str]) -> tuple[ServerKind, int | None, str | None] | None:
    """(kind, port, model) when ``argv`` is an inference server, else None."""
    if not argv:
        return None
    base = [os.path.basename(a) for a in argv[:4]]
    joined = " ".join(argv)
    port_text = flag_value(argv, "--port")
    port = int(port_text) if port_text and port_text.isdigit() else None
    if "vllm.entrypoints" in joined or ("vllm" in base and "serve" in argv[:5]):
        model = flag_value(argv, "--model")
        if model is None and "serve" in argv:
            i = argv.index("serve")
            if i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                model = argv[i + 1]
        # vLLM's EngineCore / worker children share the cmdline: only the API server listens
        return "vllm", port or 8000, model
    if any(b in {"llama-server", "llama-server.exe"} for b in base):
        return "llama.cpp", port or 8080, flag_value(argv, "-m", "--model")
    if "sglang.launch_server" in joined:
        return "sglang", port or 30000, flag_value(argv, "--model-path", "--model")
    return None


def find_inference_processes(*, exclude_pids: Iterable[int] = ()) -> list[InferenceProcess]:
    """vLLM (``vllm serve`` / ``vllm.entrypoints``), llama.cpp ``llama-server`` and SGLang processes.

    Child processes of a server that carry the same command line (vLLM's engine core) are folded
    into their parent.
    """
    import psutil

    excluded = set(exclude_pids) | {os.getpid()}
    found: dict[int, InferenceProcess] = {}
    parents: dict[int, int] = {}
    for proc in psutil.process_iter(["pid", "ppid", "cmdline", "memory_info"]):
        try:
            info = proc.info
            argv = info.get("cmdline") or []
            hit = classify_cmdline(list(argv))
            if hit is None or info["pid"] in excluded:
                continue
            kind, port, model = hit
            mem = info.get("memory_info")
            found[info["pid"]] = InferenceProcess(
                pid=info["pid"],
                kind=kind,
                port=port,
                model=model,
                rss_bytes=int(mem.rss) if mem is not None else None,
                cmdline=" ".join(argv)[:300],
            )
            parents[info["pid"]] = info.get("ppid") or 0
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    roots = [p for pid, p in found.items() if parents.get(pid) not in found]
    return sorted(roots, key=lambda p: p.pid)
