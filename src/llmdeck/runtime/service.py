"""The runtime service: the one library way to run a server (CLI, quickstart, gateway, tune, tests).

``up(spec, settings, options, events)`` owns the whole sequence — validation and the port, once (a
:class:`~llmdeck.runtime.launcher.ValidatedSpec` handed down), preflight with plan's fatal lint, the
launch, readiness phases with the start-up watchdog, diagnosis on failure with the engine stopped,
warm-up — and reports progress as typed :class:`ServiceEvent` objects that the caller renders;
``start`` and ``await_ready`` are its halves, ``UpOptions.bare()`` the start alone (no preflight,
unified sizing or watchdog). ``restart`` is seed 000's gotcha 4 done right: stop, wait for the
memory to come back, check the other tenants (unloading Ollama's models when asked), start, follow
to ready. ``down`` and ``status`` complete the API.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from llmdeck.engines.secrets import split_secrets
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import PortInUseError, StartStopped, UsageError
from llmdeck.runtime import launcher, start_gate
from llmdeck.runtime.drain import let_all_finish, let_finish
from llmdeck.runtime.events import EventClock as EventClock
from llmdeck.runtime.events import EventKind as EventKind
from llmdeck.runtime.events import Events as Events
from llmdeck.runtime.events import ServiceEvent as ServiceEvent
from llmdeck.runtime.events import ignore as _ignore
from llmdeck.runtime.host import wait_memory_settles
from llmdeck.runtime.launch_plan import LaunchPlan
from llmdeck.runtime.launcher import ValidatedSpec
from llmdeck.runtime.phases import PhaseTracker
from llmdeck.runtime.state import ServerRecord, StartedBy, StateStore
from llmdeck.runtime.status import ServerStatus, server_status
from llmdeck.runtime.watchdog import StartupWatchdog, WatchdogConfig
from llmdeck.settings import Settings
from llmdeck.util.interrupts import interrupts_held
from llmdeck.util.units import GIB, fmt_gib


class UpOptions(BaseModel):
    """How ``up`` runs; ``watchdog=None`` turns the start-up watchdog off."""

    force: bool = Field(False, description="Start even when preflight finds problems.")
    timeout_s: float | None = Field(None, gt=0, description="Readiness timeout (default: settings).")
    warmup: bool = False
    exclude_pids: tuple[int, ...] = ()
    watchdog: WatchdogConfig | None = Field(default_factory=WatchdogConfig)
    preflight: bool = True
    size_by_bytes: bool = Field(
        True, description="On unified memory: --kv-cache-memory-bytes from live memory, page cache dropped."
    )
    reserve_gib: float | None = Field(None, ge=0, description="Unified memory: kept for the OS (settings).")
    stop_when: Callable[[], bool] | None = Field(
        None, exclude=True, description="Asked before the launch and at each readiness poll: True stops it."
    )
    started_by: StartedBy = Field("up", description="Recorded: the gateway stops only its own.")
    leashed: bool = Field(
        False, description="A foreground start (a tune's trial, quickstart): it dies with this process."
    )

    @classmethod
    def bare(cls, **kw: Any) -> UpOptions:
        """The start alone: no preflight, no unified sizing, no watchdog (test fixtures, scripts)."""
        return cls(preflight=False, size_by_bytes=False, watchdog=None, **kw)


def preflight(
    checked: ValidatedSpec, settings: Settings, options: UpOptions, clock: EventClock
) -> LaunchPlan:
    """Run preflight; every finding becomes an event; blocking ones raise unless ``force``. Returns the
    start's plan, made once inside it (:func:`~llmdeck.runtime.preflight.check_launch`).

    The :class:`ValidatedSpec` had its port checked when it was made: preflight does not check it again."""
    from llmdeck.runtime.preflight import check_launch

    report, launch = check_launch(
        checked.spec,
        need_bytes=None,
        settings=settings,
        exclude_pids=options.exclude_pids,
        port_checked=True,
        probe_timeout_s=options.timeout_s,  # a --ready-timeout under the probe's own limit bounds it
    )
    for f in report.findings:
        fix = f" Fix: {f.fix}" if f.fix else ""
        clock.emit("preflight", f"preflight {f.severity}: {f.message}{fix}", id=f.id, severity=f.severity)
    blocking = [f for f in report.findings if f.severity == "error"]
    if not blocking or options.force:
        return launch
    # the id itself: "port" in the id also matched vllm-not-importable and gpu-memory-not-supported,
    # which were then raised as a PortInUseError ("the port is taken") with their own message
    port_issue = next((f for f in blocking if f.id == "port-in-use"), None)
    if port_issue is not None:  # the precise PortInUseError: the finding's own words
        raise PortInUseError(port_issue.message, hint=port_issue.fix)
    raise UsageError(
        f"Preflight found {len(blocking)} problem(s): " + " ".join(f.message for f in blocking),
        hint="Fix them, or pass --force to start anyway.",
    )


def _phase_lines(clock: EventClock, watchdog: StartupWatchdog | None) -> Callable[[str], None]:
    """Phase events, each with what the start has taken from the pool so far (MemAvailable's fall
    since the start; its peak from the watchdog's samples): compile and autotune transients show."""
    from llmdeck.runtime.host import read_meminfo

    tracker = PhaseTracker()
    start_available = read_meminfo().available

    def on_line(line: str) -> None:
        for event in tracker.feed(line):
            now = read_meminfo().available
            lowest = min(now, watchdog.lowest_available or now) if watchdog is not None else now
            used, peak = start_available - now, start_available - lowest
            mem = f"pool +{used / GIB:.2f} GiB (peak +{peak / GIB:.2f})"
            detail = f"{event.detail} · {mem}" if event.detail else mem
            clock.emit("phase", event.label, detail=detail, pool_used_bytes=used, pool_peak_bytes=peak)

    return on_line


def _unified_start(
    checked: ValidatedSpec,
    launch: LaunchPlan | None,
    settings: Settings,
    options: UpOptions,
    clock: EventClock,
) -> ValidatedSpec:
    """Unified memory: the KV cache sized by bytes from live memory (``--kv-cache-memory-bytes``),
    beside the engine overhead of the start's plan (made here when preflight did not run)."""
    from llmdeck.runtime import launch_plan, unified

    if not options.size_by_bytes or not unified.is_unified(checked.spec):
        return checked
    launch = launch or launch_plan.make(checked.spec)
    reserve = settings.unified_reserve_gib if options.reserve_gib is None else options.reserve_gib
    spec, sizing = unified.plan_start(
        checked.spec,
        reserve_bytes=int(reserve * GIB),
        servers_dir=settings.servers_dir,
        planned_overhead=launch.overhead_bytes(),
    )
    clock.emit("memory", sizing.summary(), sizing=sizing.model_dump())
    return checked.resized(spec)


def _drop_page_cache(spec: LaunchSpec, clock: EventClock) -> None:
    """Right before the launch (after preflight read the config): the model's files leave page cache."""
    from llmdeck.runtime import unified

    drop = unified.drop_model_page_cache(spec)
    clock.emit("memory", drop.summary(), page_cache=drop.model_dump())


def start(
    spec: LaunchSpec,
    settings: Settings,
    options: UpOptions | None = None,
    clock: EventClock | None = None,
) -> ServerRecord:
    """Launch in the background; the record is saved before readiness is awaited.

    The spec is validated and its port checked once, here; the later steps take that ValidatedSpec."""
    options = options or UpOptions()
    clock = clock or EventClock(_ignore)
    store = StateStore(settings.servers_dir)
    start_gate.refuse_running(store, spec.name)  # before the checks: a live one holds the port
    checked = launcher.validate(spec)
    # a dead one's leftovers (an EngineCore that outlived its API server, holding the GPU) would count
    # as another tenant in preflight: cleared now, its record with them (its log stays)
    cleared = start_gate.forget_dead(store, spec.name)
    if cleared is not None:
        left = f"{cleared.leftovers} of its processes lived on (vLLM's engine core holds the memory): stopped"
        said = left if cleared.leftovers else f"its record cleared ({cleared.outcome})"
        clock.emit("stopped", f"{spec.name} had died; {said}", outcome=cleared.outcome)
    launch = preflight(checked, settings, options, clock) if options.preflight else None
    sized = _unified_start(checked, launch, settings, options, clock)
    if sized is not checked:
        _drop_page_cache(sized.spec, clock)
    spec = sized.spec
    _stop_asked(spec.name, options)
    asked = None if sized is checked else split_secrets(checked.spec)[0]  # recorded for a restart
    clock.emit("starting", f"starting {spec.name} ({spec.engine}): {spec.model} on port {spec.port}")
    # the signals that came from the engine's spawn to its record, held (not while the start lock is
    # awaited, nor while a container's image is pulled)
    held: list[int] = []
    record = launcher.start_background(
        sized,
        settings,
        options.started_by,
        leashed=options.leashed,
        progress=lambda line: clock.emit("image", line),  # a container's image pulled
        sized_from=asked,
        spawning=interrupts_held("starting the engine", held),
    )
    try:  # a signal that came while the engine was spawned and recorded is raised here, where it stops it
        for signum in held:
            signal.raise_signal(signum)
        clock.emit("log", f"log: {record.log_path}", path=str(record.log_path))
    except BaseException as exc:
        _stop_started(record, settings, clock, exc)
        raise
    return record


def _stop_started(record: ServerRecord, settings: Settings, clock: EventClock, exc: BaseException) -> None:
    """The engine of a start that failed or was interrupted, stopped (a second Ctrl-C cannot cut it short)."""
    why = str(exc) or (
        "interrupted (Ctrl-C)"
        if isinstance(exc, KeyboardInterrupt)
        else "stopped by a signal"
        if not isinstance(exc, Exception)
        else "an unexpected error"
    )
    with interrupts_held("stopping the engine"):  # a second Ctrl-C had left it running
        clock.emit("failed", f"{record.name} did not become ready: {why}")
        outcome = launcher.stop_engine(record, grace_s=10)
        start_gate.forget_own(StateStore(settings.servers_dir), record, settings)  # a newer one's stays
        clock.emit("stopped", f"engine stopped ({outcome}); its log stays at {record.log_path}")


def await_ready(
    record: ServerRecord,
    settings: Settings,
    options: UpOptions | None = None,
    clock: EventClock | None = None,
) -> ServerRecord:
    """Follow the phases to ready; on any failure (or Ctrl-C) stop the engine, then re-raise."""
    options = options or UpOptions()
    clock = clock or EventClock(_ignore)
    try:  # from the first line: a signal while the watchdog is set up must stop the engine too
        from llmdeck.runtime.guard import tree_bytes

        pid = record.pid
        held = (lambda: tree_bytes(pid)) if pid else None
        watchdog = StartupWatchdog(options.watchdog, held=held) if options.watchdog is not None else None
        record = launcher.wait_ready(
            record,
            settings,
            timeout_s=options.timeout_s,
            on_line=_phase_lines(clock, watchdog),
            on_poll=_poller(record.name, options, watchdog),
        )
    except BaseException as exc:
        _stop_started(record, settings, clock, exc)
        raise
    clock.emit("ready", f"ready: {record.served_model_name} at {record.base_url}/v1", url=record.base_url)
    _guard(record, settings, options, clock)
    return record


def _stop_asked(name: str, options: UpOptions) -> None:
    if options.stop_when is not None and options.stop_when():
        raise StartStopped(f"The start of {name!r} was stopped on request before the server was ready.")


def _poller(name: str, options: UpOptions, watchdog: StartupWatchdog | None) -> Callable[[], None] | None:
    """What each readiness poll runs: the start-up watchdog, then the caller's stop request."""
    if watchdog is None and options.stop_when is None:
        return None

    def poll() -> None:
        if watchdog is not None:
            watchdog.check()
        _stop_asked(name, options)

    return poll


def _guard(record: ServerRecord, settings: Settings, options: UpOptions, clock: EventClock) -> None:
    """On unified memory the watchdog stays on while the server runs (:mod:`llmdeck.runtime.guard`)."""
    from llmdeck.runtime import unified

    if options.watchdog is None or not record.pid or not unified.is_unified(record.spec):
        return
    guard_server(record, settings, options.watchdog, clock.events)


def guard_server(
    record: ServerRecord, settings: Settings, config: WatchdogConfig, events: Events = _ignore
) -> int:
    """Leave the running watchdog behind for ``record`` (a detached process); returns its pid."""
    from llmdeck.runtime import guard
    from llmdeck.runtime.host import read_meminfo

    if not record.pid:
        raise UsageError(f"{record.name} has no process to guard (a container).", hint="Use --no-watchdog.")
    pid = guard.spawn(record.name, record.pid, settings.servers_dir, config)
    text = (
        f"MemAvailable now {read_meminfo().available / GIB:.2f} GiB; the watchdog (pid {pid}) guards "
        f"{record.name} every {config.interval_s:g} s: it stops it under {config.floor_gib:g} GiB "
        "(--watchdog-floor-gib)"
    )
    events(ServiceEvent(kind="memory", message=text, data={"guard_pid": pid}))
    return pid


def up(
    spec: LaunchSpec, settings: Settings, options: UpOptions | None = None, events: Events = _ignore
) -> ServerRecord:
    """Start a server and wait until it is ready (the whole sequence; see the module doc)."""
    options = options or UpOptions()
    clock = EventClock(events)
    record = start(spec, settings, options, clock)
    record = await_ready(record, settings, options, clock)
    if options.warmup:
        warm_up(record, settings, clock)
    return record


def warm_up(record: ServerRecord, settings: Settings, clock: EventClock) -> None:
    import asyncio

    from llmdeck.client.openai import get_models
    from llmdeck.runtime.warmup import warmup

    key = StateStore(settings.servers_dir).load_secrets(record.name).get("VLLM_API_KEY") or settings.api_key
    models = get_models(record.base_url, api_key=key, timeout_s=10)
    mml = models[0].get("max_model_len") if models else None
    max_len = mml if isinstance(mml, int) and mml > 0 else 2048
    clock.emit("warmup", f"warming up {record.name} (prompt lengths up to {max_len} tokens) …")
    report = asyncio.run(
        warmup(record.base_url, record.served_model_name, max_model_len=max_len, api_key=key)
    )
    clock.emit("warmup", report.summary())


def down(
    name: str, settings: Settings, events: Events = _ignore, who: str = "`llmdeck down`", drain_s: float = 0.0
) -> str:
    """Stop ``name``; with ``drain_s``, after its requests finish (at most that long: runtime/drain.py)."""
    clock = EventClock(events)
    if drain_s > 0:
        let_finish(StateStore(settings.servers_dir).load(name), drain_s, clock)
    clock.emit("stopping", f"stopping {name} …")
    outcome = launcher.down(name, settings, who=who)  # who: noted in its log
    clock.emit("stopped", f"{name}: {outcome}", outcome=outcome)
    return outcome


def down_all(settings: Settings, events: Events = _ignore, drain_s: float = 0.0) -> dict[str, str]:
    """Stop every recorded server; with ``drain_s``, after their requests finish (that long, all told)."""
    let_all_finish(settings.servers_dir, drain_s, EventClock(events))
    return launcher.down_all(settings)


class RestartOptions(UpOptions):
    unload_ollama: bool = Field(False, description="Unload the models Ollama keeps loaded before starting.")
    drain_s: float = Field(60.0, ge=0, description="Wait this long at most for its requests to finish.")


def restart(
    name: str,
    settings: Settings,
    options: RestartOptions | None = None,
    events: Events = _ignore,
    changes: Sequence[str] = (),
) -> ServerRecord:
    """Stop, wait for memory, check (and optionally unload) tenants, start, follow to ready. ``changes``:
    vLLM flags in place of the same recorded ones (:func:`llmdeck.plan.changes.changed_spec`). The new
    start keeps the record's ``started_by`` (``options.started_by`` is not used)."""
    from llmdeck.runtime.tenants import ollama_unload_all

    options = options or RestartOptions()
    clock = EventClock(events)
    store = StateStore(settings.servers_dir)
    record = store.load(name)
    secrets = store.load_secrets(record.name)  # the key it was started with, for the new start
    asked = record.sized_from or record.spec  # unified memory: sized again from live memory
    spec = asked.model_copy(update={"env": {**asked.env, **secrets}})
    if changes:
        from llmdeck.plan.changes import changed_spec

        spec = changed_spec(spec, changes)
    launcher.validate_spec(spec)  # before the stop: a model moved away had left it stopped, unstartable
    let_finish(record, options.drain_s, clock, who=launcher.restart_who(name))
    clock.emit("stopping", f"stopping {record.name} …")
    outcome = launcher.down(record.name, settings, who=launcher.restart_who(name))  # "stale": left alone
    freed = wait_memory_settles()
    clock.emit("memory", f"memory settled: MemAvailable {fmt_gib(freed)}", available_bytes=freed)
    if options.unload_ollama:
        unloaded = ollama_unload_all()
        if unloaded:
            clock.emit("tenants", f"unloaded Ollama models: {', '.join(unloaded)}", models=unloaded)
    exclude = (record.pid,) if record.pid and outcome != "stale" else ()
    dump = options.model_dump(exclude={"unload_ollama", "exclude_pids", "drain_s"})  # not stop_when
    dump["started_by"] = record.started_by  # the gateway's stays its own: `gateway down` stops it
    up_options = UpOptions(**dump, exclude_pids=exclude, stop_when=options.stop_when)
    new = start(spec, settings, up_options, clock)
    return await_ready(new, settings, up_options, clock)


def status(settings: Settings, name: str | None = None) -> list[ServerStatus]:
    store = StateStore(settings.servers_dir)
    records = [store.load(name)] if name else store.list()
    return [server_status(r) for r in records]
