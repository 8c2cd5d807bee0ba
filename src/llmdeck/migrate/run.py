"""``llmdeck migrate ollama``: an Ollama setup -> launch specs + a gateway config for vLLM.

Each local Ollama model with a vLLM build in the catalog gets a plan (memory, KV tokens, lint) and a
launch spec; the gateway config routes the Ollama names the user's clients already send to those
specs (started on demand within a memory budget, as Ollama loads on demand). What has no vLLM build
is listed, not guessed. Ollama's loaded models are reported with the command that unloads them;
only ``--unload`` unloads them (seed 000 Gotcha 3: they hold the memory vLLM needs).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from llmdeck.catalog.entries import Catalog, CatalogEntry, load_catalog
from llmdeck.errors import AlreadyExistsError, LlmdeckError, OperationError
from llmdeck.migrate.mapping import Mapping, map_model
from llmdeck.migrate.ollama_api import OllamaInventory, OllamaModelInfo, canonical, read_inventory
from llmdeck.migrate.results import (
    Change,
    LoadedModel,
    MigratedModel,
    MigrateRequest,
    MigrationReport,
    Unmapped,
)
from llmdeck.util.owned import refuse_user_files
from llmdeck.util.redact import redact_url

GATEWAY_FILE = "gateway.yaml"
REPORT_FILE = "migration.json"
_ENABLE_THINKING_PARSERS = {"qwen3", "glm45"}  # templates that read chat_template_kwargs.enable_thinking


def server_name(ollama_name: str) -> str:
    """``qwen3:30b-a3b`` -> ``ollama-qwen3-30b-a3b`` (a valid server and file name)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", ollama_name.lower()).strip("-.") or "model"
    return f"ollama-{slug}"[:63].rstrip("-.")


def _flags(entry: CatalogEntry) -> list[str]:
    args = ["--enable-prefix-caching"]
    if entry.tool_call_parser:
        args += ["--enable-auto-tool-choice", "--tool-call-parser", entry.tool_call_parser]
    if entry.reasoning_parser:
        args += ["--reasoning-parser", entry.reasoning_parser]
    return args


def thinking_off_by_default(entry: CatalogEntry) -> bool:
    return entry.thinking and entry.reasoning_parser in _ENABLE_THINKING_PARSERS


def _changes(info: OllamaModelInfo, entry: CatalogEntry, plan: Any) -> list[Change]:
    ctx = str(info.num_ctx) if info.num_ctx else "Ollama's default (num_ctx not set on the model)"
    out = [
        Change(
            what="weights",
            ollama=f"GGUF {info.quantization_level or '?'} ({info.parameter_size or '?'} parameters)",
            vllm=f"{entry.repo_id} ({entry.quantization or 'bf16'}, ~{entry.size_on_disk_gb or '?'} GB "
            "to download)",
            note="vLLM does not read Ollama's GGUF blobs; the safetensors build is downloaded once.",
        ),
        Change(
            what="context",
            ollama=ctx,
            vllm=f"max_model_len {plan.memory.max_model_len}",
            note="Ollama cuts a prompt longer than num_ctx silently; vLLM refuses it with HTTP 400.",
        ),
        Change(
            what="memory",
            ollama=f"{info.loaded_bytes / 2**30:.1f} GiB while loaded"
            if info.loaded_bytes
            else ("loaded (Ollama gave no size)" if info.loaded else "not loaded"),
            vllm=f"{plan.memory.requested_gib:.1f} GiB from the start (weights "
            f"{plan.memory.weights_gib:.1f} GiB + KV cache {plan.memory.available_kv_gib:.1f} GiB)",
            note="vLLM reserves its KV cache up front; the gateway stops idle models to make room.",
        ),
    ]
    if entry.tool_call_parser:
        out.append(
            Change(
                what="tool calls",
                ollama="parsed by Ollama's template" if info.tools else "no tools capability listed",
                vllm=f"--enable-auto-tool-choice --tool-call-parser {entry.tool_call_parser}",
            )
        )
    if entry.thinking:
        off = thinking_off_by_default(entry)
        out.append(
            Change(
                what="thinking",
                ollama="thinking capability (the `think` request field)" if info.thinks else "not listed",
                vllm=f"--reasoning-parser {entry.reasoning_parser}: thoughts arrive in reasoning_content",
                note="the gateway sends chat_template_kwargs.enable_thinking=false unless a request sets "
                "it (seed 000 Gotcha 2: a thinking model spends max_tokens on <think>)"
                if off
                else "",
            )
        )
    if info.expires_at:
        out.append(
            Change(
                what="keep-alive",
                ollama=f"unloads itself when idle (now loaded until {info.expires_at})",
                vllm="stays loaded until stopped; the gateway stops the least recently used model when "
                "another needs the memory",
            )
        )
    return out


def _plan(entry: CatalogEntry, req: MigrateRequest, name: str, port: int, context: int | None) -> Any:
    from llmdeck.plan.planner import PlanRequest, make_plan

    preq = PlanRequest(
        model=entry.name,
        machine=req.machine,
        context=context,
        engine=req.engine,
        port=port,
        name=name,
        vllm_args=_flags(entry),
    )
    return make_plan(preq, raise_if_impossible=False)


def _migrate_one(
    m: Mapping, req: MigrateRequest, port: int, taken: set[str]
) -> tuple[MigratedModel | None, Any, str]:
    """(the migrated model, its plan, "") or (None, None, why it cannot be)."""
    entry = m.entry
    assert entry is not None
    name = server_name(m.ollama.name)
    while name in taken:
        name = f"{name[:60]}-{len(taken)}"
    taken.add(name)
    plan = _plan(entry, req, name, port, req.context)
    if not plan.memory.fits and req.context is None and m.ollama.num_ctx:
        plan = _plan(entry, req, name, port, m.ollama.num_ctx)  # Ollama's own context, then
    if not plan.memory.fits:
        err = plan.fit_error()
        return None, None, f"{entry.name} does not fit {plan.machine.name}: {err.message if err else '?'}"
    aliases = _aliases(m.ollama)
    mem = plan.memory
    migrated = MigratedModel(
        ollama_name=m.ollama.name,
        aliases=aliases,
        catalog_name=entry.name,
        repo_id=entry.repo_id,
        quantization=entry.quantization,
        why=m.why,
        alternatives=m.alternatives,
        spec_file=f"{name}.json",
        server_name=name,
        port=port,
        vllm_args=list(plan.spec.vllm_args),
        max_model_len=mem.max_model_len,
        weights_gib=round(mem.weights_gib, 2),
        requested_gib=round(mem.requested_gib, 2),
        kv_cache_gib=round(mem.available_kv_gib, 2),
        kv_cache_tokens=mem.capacity.kv_cache_tokens,
        max_concurrency_at_max_len=round(mem.capacity.max_concurrency, 2),
        lint_errors=[f.message for f in plan.findings if f.severity == "error"],
        lint_warnings=[f.message for f in plan.findings if f.severity == "warning"],
        changes=_changes(m.ollama, entry, plan),
    )
    return migrated, plan, ""


def _aliases(info: OllamaModelInfo) -> list[str]:
    """The names a client may send for the model: each spelling /api/tags gave, and for a ``:latest`` one
    the bare name too."""
    out: list[str] = []
    for name in [info.name, *info.also_named]:
        bare = name.rsplit(":", 1)[0] if ":" in name else name
        forms = [bare, f"{bare}:latest"] if canonical(name).endswith(":latest") else [name]
        out += [f for f in forms if f not in out]
    return out


def gateway_document(models: list[MigratedModel], catalog: Catalog) -> dict[str, Any]:
    """The gateway config: one route per alias, its backend the model's spec (started on demand)."""
    routes: list[dict[str, Any]] = []
    for mm in models:
        entry = catalog.get(mm.catalog_name)
        backend = {"spec": mm.spec_file, "memory_gib": max(1.0, round(mm.requested_gib + 0.05, 1))}
        for alias in mm.aliases:
            route: dict[str, Any] = {"model": alias, "backends": [dict(backend)]}
            if thinking_off_by_default(entry):
                route["defaults"] = {"chat_template_kwargs": {"enable_thinking": False}}
            routes.append(route)
    return {
        "schema_version": 1,
        "routes": routes,
        "budget": {"memory_gib": "auto", "allow_unload_ollama": False},
    }


def prepare_out_dir(req: MigrateRequest, *, make: bool = True) -> None:
    """Exit 2 (checked before anything is asked of Ollama, ``make=False``) unless --out is new, empty,
    or llmdeck's and --force is given: a folder of the user's files is never touched. ``make``: clear
    llmdeck's earlier migration and mark the folder as llmdeck's."""
    from llmdeck.util.owned import clear_made_dir, is_made_by_llmdeck, mark_made, refuse_unless_made

    out = req.out_dir
    if out.exists() and not out.is_dir():
        raise AlreadyExistsError(
            f"{out} exists and is not a folder.", hint="Give --out a folder (new or made by llmdeck)."
        )
    if out.is_dir() and any(p.name != ".llmdeck-made" for p in out.iterdir()):
        refuse_unless_made(out, "migration")
        if not req.force:
            raise AlreadyExistsError(
                f"{out} already holds a migration"
                + (" (made by llmdeck)" if is_made_by_llmdeck(out) else "")
                + "; llmdeck will not overwrite it.",
                hint="Pass --force to replace it, or give another --out folder.",
            )
        if make:
            clear_made_dir(out, "migration")
    if make:
        mark_made(out, "llmdeck migrate ollama")


def _loaded(inv: OllamaInventory) -> list[LoadedModel]:
    from llmdeck.runtime.tenants import ollama_unload_command

    return [
        LoadedModel(
            name=m.name,
            bytes=m.loaded_bytes,
            vram_bytes=m.loaded_vram_bytes,
            expires_at=m.expires_at,
            unload_command=ollama_unload_command(m.name, redact_url(inv.url)),
        )
        for m in inv.loaded
    ]


def _next(report: MigrationReport, req: MigrateRequest) -> list[str]:
    cmds = [lm.unload_command for lm in report.loaded if lm.name not in report.unloaded]
    if report.gateway_config:
        cmds.append(
            f"llmdeck gateway up --config {shlex.quote(report.gateway_config)} --port {req.gateway_port}"
        )
    return cmds


def migrate_ollama(req: MigrateRequest, settings: Any, catalog: Catalog | None = None) -> MigrationReport:
    """Read Ollama, map, plan, write the specs, the gateway config and migration.json (atomically)."""
    from llmdeck.plan.machine import get_machine

    catalog = catalog or load_catalog(list(getattr(settings, "catalog_paths", []) or []))
    prepare_out_dir(req, make=False)
    machine = get_machine(req.machine)
    inv = read_inventory(req.ollama_url, timeout_s=req.timeout_s)
    report = MigrationReport(  # what is shown and stored: a URL's password hidden (inv.url keeps it)
        request=req, ollama_url=redact_url(inv.url), ollama_version=inv.version, machine=machine.name
    )
    report.loaded = _loaded(inv)
    taken: set[str] = set()
    specs: list[Any] = []
    for info in inv.models:
        m = map_model(info, catalog, machine.compute_capability_major)
        if m.entry is not None:
            migrated, plan, why = _migrate_one(m, req, req.base_port + len(specs), taken)
            if migrated is not None:
                report.migrated.append(migrated)
                specs.append(plan.spec)
                continue
        else:
            why = m.why
        report.unmapped.append(
            Unmapped(
                ollama_name=info.name,
                family=info.family,
                parameter_size=info.parameter_size,
                quantization_level=info.quantization_level,
                why=why,
            )
        )
    outputs = (
        [mm.spec_file for mm in report.migrated] + [GATEWAY_FILE] * bool(report.migrated) + [REPORT_FILE]
    )
    refuse_user_files(req.out_dir, outputs)  # before anything is unloaded, cleared or written
    if req.unload:
        from llmdeck.runtime.tenants import ollama_unload

        for lm in report.loaded:
            ollama_unload(lm.name, inv.url, timeout_s=req.timeout_s)
            report.unloaded.append(lm.name)
    prepare_out_dir(req)
    _write(report, req, specs, catalog, settings)
    return report


def _write(
    report: MigrationReport, req: MigrateRequest, specs: list[Any], catalog: Catalog, settings: Any
) -> None:
    import yaml

    from llmdeck.engines.spec import write_spec_file
    from llmdeck.util.atomic import atomic_write_json, atomic_write_text
    from llmdeck.util.owned import seal_made

    out = req.out_dir
    for mm, spec in zip(report.migrated, specs, strict=True):
        write_spec_file(out / mm.spec_file, spec)
    if report.migrated:
        path = out / GATEWAY_FILE
        head = "# Written by `llmdeck migrate ollama`: the Ollama model names, served by vLLM.\n"
        body = yaml.safe_dump(gateway_document(report.migrated, catalog), sort_keys=False)
        atomic_write_text(path, head + body)
        report.gateway_config = str(path)
        _check_gateway(path, settings)
    report.next_commands = _next(report, req)
    atomic_write_json(out / REPORT_FILE, report)
    seal_made(out)  # what a later --force may delete: these files, never one the user adds


def _check_gateway(path: Any, settings: Any) -> None:
    """The config must be one `llmdeck gateway up` accepts: loaded the way it loads it."""
    from llmdeck.gateway.config import load_config

    try:
        load_config(path, settings)
    except LlmdeckError as exc:
        raise OperationError(
            f"The gateway config llmdeck wrote ({path}) does not load: {exc.message}",
            hint="This is a bug in `llmdeck migrate`; please report it with migration.json.",
        ) from exc
