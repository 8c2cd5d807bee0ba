"""The blocking steps of a managed model's life, run in worker threads by the model manager.

Start and stop go through the runtime service API (``runtime.service.up``: validation, port,
preflight, launch, readiness with the start-up watchdog, diagnosis; ``down``), so a server the
gateway started is an ordinary llmdeck server (``llmdeck status``, ``llmdeck logs NAME``).

Sleep mode (opt-in per backend, ``sleep_level: 1|2``): vLLM's dev endpoints ``POST /sleep?level=N``,
``POST /wake_up`` and ``GET /is_sleeping`` (served with ``VLLM_SERVER_DEV_MODE=1`` and
``--enable-sleep-mode``; vllm/entrypoints/serve/dev/sleep/api_router.py). Level 1 keeps the weights
in host memory and drops the KV cache; level 2 drops both, so waking reloads the weights
(``/collective_rpc`` ``reload_weights``, as vLLM's docs do after a level-2 sleep) and resets the
prefix cache. On unified memory (GB10) level 1 moves the weights into the same pool and frees only
the KV cache: the manager measures what each sleep freed and stops instead of sleeping at a level that
freed (almost) nothing. After every wake :func:`probe` sends a real short generation before traffic
is routed; a wake or probe that fails is a stop and a cold start (the model's ``last_wake`` says so).
Measured on an H200 (evidence/device/serving-layer): Qwen3-Coder-30B-A3B wakes from level 1
in 1.3-1.6 s against an 86-130 s start, but falling asleep copies its 57 GiB of weights to host memory
(~42 s); level 2 sleeps in 0.1 s and wakes by a weight reload. Stop/start stays the default; sleep is
what the config asks for, and a failed wake is stopped and started afresh (the manager's ``_wake``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from llmdeck.client.httpmap import http_failure_words
from llmdeck.errors import LlmdeckError, OperationError, ServerStartError
from llmdeck.gateway.managed import ManagedBackend
from llmdeck.runtime.state import ServerRecord

log = logging.getLogger("llmdeck.gateway.models")

SLEEP_TIMEOUT_S = 300.0
PROBE_TIMEOUT_S = 60.0  # a 4-token greedy completion; a woken engine that takes longer is not well
PROBE_MAX_BYTES = 1 << 20


def start(
    backend: ManagedBackend,
    settings: Any,
    on_progress: Callable[[str], None] | None = None,
    stop_when: Callable[[], bool] | None = None,
) -> ServerRecord:
    """``runtime.service.up`` with preflight; every service event goes to the gateway log (and the
    start-up phase reached to ``on_progress``, for ``gateway status``). ``stop_when`` True: the start
    ends (before the launch, or the engine stopped while it loads) with ``StartStopped``."""
    from llmdeck.runtime.service import ServiceEvent, UpOptions, up
    from llmdeck.runtime.watchdog import WatchdogConfig

    name = backend.name

    def on_event(event: ServiceEvent) -> None:
        at = f" (+{event.seconds:.1f} s)" if event.seconds is not None else ""
        if event.kind in {"log", "phase", "ready", "failed", "stopped", "starting", "preflight", "memory"}:
            log.info("model %s: %s%s", name, event.message, at)
        if on_progress is not None and event.kind in {"preflight", "memory", "starting", "phase", "ready"}:
            on_progress(f"{event.message[:120]}{at}")

    # the same floor as `llmdeck up`: on unified memory it also guards the model while it runs
    watchdog = WatchdogConfig(floor_gib=getattr(settings, "watchdog_floor_gib", 1.5))
    options = UpOptions(
        timeout_s=backend.start_timeout_s, watchdog=watchdog, stop_when=stop_when, started_by="gateway"
    )
    return up(backend.spec, settings, options, on_event)


def diagnosis(exc: BaseException) -> str:
    """The runtime's words for a failed start: its message, its fix, and the log's error lines."""
    if not isinstance(exc, LlmdeckError):  # its class for the log only; the 503 and the events say words
        log.info("the start's failure was a %s", type(exc).__name__)
        return http_failure_words(exc, "an unexpected error (the gateway log has more)")
    text = exc.render().replace("the log tail below (whole log: ", "the log (")
    if isinstance(exc, ServerStartError) and exc.log_tail and "no known cause" in exc.message:
        lines = [ln.strip() for ln in exc.log_tail.splitlines() if ln.strip()]
        errors = [ln for ln in lines if "error" in ln.lower()][-3:] or lines[-2:]
        if errors:
            text += " Log: " + " | ".join(ln[:300] for ln in errors)
    return text


def stop(name: str, settings: Any) -> str:
    """Stop the server ``name`` the gateway started; one of the same name started by `llmdeck up` (the
    user's own, not the gateway's) is left running."""
    from llmdeck.runtime.service import down
    from llmdeck.runtime.state import StateStore

    try:
        if StateStore(settings.servers_dir).load(name).started_by != "gateway":
            return "not the gateway's (started by `llmdeck up`): left running"
        return down(name, settings, who="the gateway (a model on demand)")
    except LlmdeckError as exc:  # no record any more: it is gone already
        return f"gone ({exc.message})"


def settle_memory(kind: str) -> None:
    """After a stop on unified memory, wait (bounded) until MemAvailable stops rising."""
    if kind == "unified":
        from llmdeck.runtime.host import wait_memory_settles

        wait_memory_settles(max_s=15.0, step_s=0.5)


def free_now(kind: str, gpu_index: int) -> int | None:
    """Free memory now: MemAvailable (unified / CPU) or the GPU's free bytes through NVML."""
    if kind == "unified":
        from llmdeck.runtime.host import read_meminfo

        return read_meminfo().available
    from llmdeck.runtime.host import nvml_snapshot

    report = nvml_snapshot()
    gpu = next((g for g in report.gpus if g.index == gpu_index), None)
    return gpu.free_bytes if gpu is not None else None


def ollama_models(kind: str) -> list[tuple[str, int]]:
    """Ollama's loaded models (name, bytes in this budget's memory); none when Ollama is not there."""
    from llmdeck.runtime.tenants import ollama_ps

    status = ollama_ps()
    return [(m.name, m.size_vram if kind == "gpu" else m.size) for m in status.models]


def unload_ollama(model: str) -> None:
    from llmdeck.runtime.tenants import ollama_unload

    ollama_unload(model)


def alive_record(name: str, settings: Any) -> ServerRecord | None:
    """A live server of that name left from an earlier gateway run, to adopt instead of restarting."""
    record = live_record(name, settings)
    return record if record is not None and record.ready_at is not None else None


def live_record(name: str, settings: Any) -> ServerRecord | None:
    """A live server of that name, ready or still loading (`llmdeck restart NAME`'s new start)."""
    return live_in(settings.servers_dir, name)


def live_in(servers_dir: Path, name: str) -> ServerRecord | None:
    """:func:`live_record` in a servers folder (a `server:` backend's, gateway/comeback.py)."""
    from llmdeck.runtime.engine_state import is_alive
    from llmdeck.runtime.state import StateStore

    store = StateStore(servers_dir)
    if not store.path(name).exists():
        return None
    try:
        record = store.load(name)
    except LlmdeckError:
        return None
    return record if is_alive(record) else None


def restarting(name: str, log_path: Path) -> int | None:
    """The pid of a `llmdeck restart NAME` that stopped this server (its note in the log) and runs still:
    its new start is on its way (the memory settles, the preflight runs) though no record says so yet."""
    from llmdeck.engines.logfiles import stopper
    from llmdeck.engines.process import pid_alive
    from llmdeck.runtime.launcher import restart_who

    found = stopper(log_path)
    if found is None or found[0] != restart_who(name):
        return None
    return found[1] if pid_alive(found[1]) else None


def record_sig(name: str, settings: Any) -> tuple[int, int] | None:
    """The record file's identity now (inode, mtime), None when there is none: every save of a record
    (a new start's, its ready time) changes it, so a request asks no more than a stat while it holds."""
    return record_stamp(settings.servers_dir, name)


def record_stamp(servers_dir: Path, name: str) -> tuple[int, int] | None:
    """:func:`record_sig` in a servers folder."""
    from llmdeck.runtime.state import StateStore
    from llmdeck.util.localfile import file_stamp

    try:
        return file_stamp(StateStore(servers_dir).path(name))
    except LlmdeckError:  # a name no record can have
        return None


def successor(record: ServerRecord, settings: Any) -> ServerRecord | None:
    """Another start of ``record``'s name that runs now (`llmdeck restart NAME`: ready or still loading),
    else None: the record on disk is this start's, is gone, or its engine no longer runs."""
    from llmdeck.runtime.engine_state import is_alive
    from llmdeck.runtime.state import StateStore

    store = StateStore(settings.servers_dir)
    try:
        now = store.load(record.name) if store.path(record.name).exists() else None
    except LlmdeckError:
        return None
    same = now is not None and (now.pid, now.container_id, now.started_at) == (
        record.pid, record.container_id, record.started_at
    )  # fmt: skip
    return now if now is not None and not same and is_alive(now) else None


def still_running(record: ServerRecord) -> bool:
    """The server's engine process (or container) still runs."""
    from llmdeck.runtime.engine_state import is_alive

    return is_alive(record)


def sleep(url: str, level: int) -> None:
    _post(url, f"/sleep?level={level}", None)


def wake(url: str, level: int) -> None:
    _post(url, "/wake_up", None)
    if level == 2:  # the weights were dropped: load them again, forget the cached prefixes
        _post(url, "/collective_rpc", {"method": "reload_weights"})
        _post(url, "/reset_prefix_cache", None)


def wake_checked(url: str, backend: ManagedBackend, level: int, settings: Any) -> float:
    """:func:`wake`, then :func:`probe` with the server's own key; the probe's seconds."""
    wake(url, level)
    return probe(url, backend.spec.effective_served_name, api_key(backend.name, settings))


def probe(url: str, model: str, api_key: str | None = None) -> float:
    """After a wake: a real short generation (greedy, 4 tokens) before any traffic is routed.

    vLLM can report healthy after a wake while the engine is corrupted (vllm PR #45650), so /health
    proves nothing: the wake counts only when a completion comes back with generated tokens. Returns
    the seconds it took; raises OperationError naming what was wrong."""
    import time

    from llmdeck.util.http import IDENTITY, BodyTooLarge, NotAnswering, plain_body, read_capped
    from llmdeck.util.jsonsafe import loads

    body = {"model": model, "prompt": "Hello", "max_tokens": 4, "temperature": 0}
    headers = {**IDENTITY, **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
    t0 = time.monotonic()
    try:  # bounded as a whole and capped: an engine that trickles or never ends its reply is not well
        with httpx.stream(
            "POST", url + "/v1/completions", json=body, headers=headers, timeout=PROBE_TIMEOUT_S
        ) as resp:
            plain_body(resp, url + "/v1/completions")
            raw = read_capped(resp.iter_bytes(), url, cap=PROBE_MAX_BYTES, until=t0 + PROBE_TIMEOUT_S)
        data = loads(raw) if resp.status_code == 200 else None
    except (NotAnswering, BodyTooLarge) as exc:
        raise OperationError(
            f"the post-wake probe to {url} got no whole reply within {PROBE_TIMEOUT_S:g} s and 1 MiB"
        ) from exc
    except (httpx.HTTPError, ValueError) as exc:
        raise OperationError(f"the post-wake probe to {url} failed ({_failure_words(exc)})") from exc
    why = _probe_problem(resp.status_code, data)
    if why:
        raise OperationError(f"the post-wake probe to {url} answered wrong: {why}")
    return time.monotonic() - t0


def _probe_problem(status: int, data: Any) -> str:
    if status != 200:
        return f"HTTP {status}"
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return "no choices in the reply"
    if not isinstance(choices[0].get("text"), str):
        return "the choice has no text"
    usage = data.get("usage") if isinstance(data, dict) else None
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    if not isinstance(tokens, int) or tokens < 1:
        return f"no generated tokens (usage.completion_tokens {tokens!r})"
    return ""


def api_key(name: str, settings: Any) -> str | None:
    """The key the model's server was started with (its secrets), else the settings' key."""
    from llmdeck.runtime.state import StateStore

    try:
        key = StateStore(settings.servers_dir).load_secrets(name).get("VLLM_API_KEY")
    except LlmdeckError:
        key = None
    return key or getattr(settings, "api_key", None)


def watchdog_trip(name: str, settings: Any) -> str | None:
    """The running watchdog's words when it stopped this model (runtime.guard), else None."""
    from llmdeck.runtime.guard import read_trip

    trip = read_trip(settings.servers_dir, name)
    return f"{trip.message} {trip.hint}" if trip is not None else None


def _post(url: str, path: str, body: dict[str, Any] | None) -> None:
    from llmdeck.util.deadline import deadline_transport
    from llmdeck.util.http import IDENTITY, BodyTooLarge, plain_body, read_capped

    try:  # bounded as a whole (SLEEP_TIMEOUT_S) and capped: an engine that trickles cannot hold the model
        with (
            httpx.Client(timeout=SLEEP_TIMEOUT_S, transport=deadline_transport()) as client,
            client.stream("POST", url + path, json=body, headers=IDENTITY) as resp,
        ):
            resp.raise_for_status()
            plain_body(resp, url + path)
            read_capped(resp.iter_bytes(), url + path, cap=PROBE_MAX_BYTES)
    except (httpx.HTTPError, BodyTooLarge) as exc:
        raise OperationError(
            f"vLLM at {url} refused POST {path} ({_failure_words(exc)}).",
            hint="Sleep mode needs --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1 (the gateway adds both "
            "for `sleep_level:` backends) and a GPU build of vLLM.",
        ) from exc


def _failure_words(exc: Exception) -> str:
    """A request to the engine that failed, in words (no Python class name): HTTP N for a status (not
    httpx's paragraph with its documentation link), "not JSON" for a reply that is none."""
    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code}"
    if isinstance(exc, ValueError):  # the probe's reply: not JSON, or JSON nested past the reader's depth
        return "its reply is not JSON"
    return http_failure_words(exc)[:200]
