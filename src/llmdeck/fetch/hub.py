"""Download a model repo with ``huggingface_hub.snapshot_download`` and verify what arrived.

Downloads honour ``HF_ENDPOINT`` (e.g. ``https://hf-mirror.com``; ``--endpoint`` sets it for one
call) and ``HF_TOKEN`` for gated repos. Run again, a download goes on where it stopped, file by file:
the files already whole are kept (huggingface_hub 2.4, pinned, starts a file cut off mid-way over).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from llmdeck import __version__
from llmdeck.errors import DownloadError, LlmdeckError, MissingDependencyError, UsageError
from llmdeck.fetch.guards import HubFiles, hub_files, refuse_files_not_from_the_hub, refuse_nothing_matched
from llmdeck.fetch.hubreply import check_hub_reply, not_a_hub, other_failure, received
from llmdeck.fetch.verify import (
    MIRROR_HINT,
    OFFLINE_VARS,
    VerifyReport,
    offline_error,
    offline_set,
    verify_download,
)
from llmdeck.util.http import BodyTooLarge, NotAnswering
from llmdeck.util.pagecache import drop_files
from llmdeck.util.redact import redact_url
from llmdeck.util.safetext import is_unsafe

FETCH_RESULT_SCHEMA_VERSION = 1
DEFAULT_ENDPOINT = "https://huggingface.co"
# What `llmdeck plan` needs: the config, the tokenizer and the safetensors index (no weights).
CONFIG_ONLY_PATTERNS: tuple[str, ...] = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "*.tiktoken",
    "chat_template.jinja",
    "chat_template.json",
    "*.safetensors.index.json",
)
_ENDPOINT_HINT = "Check --endpoint (or HF_ENDPOINT): it should be the hub or a mirror. "
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
REPO_ID_RE = re.compile(rf"^(?:{_NAME}/)?{_NAME}$")


class FetchResult(BaseModel):
    """What ``llmdeck fetch`` downloaded and how it verified (``--json`` prints this)."""

    schema_version: int = FETCH_RESULT_SCHEMA_VERSION
    repo_id: str
    revision: str | None = None
    endpoint: str
    local_dir: str
    config_only: bool = False
    include: list[str] = Field(default_factory=list)
    files: int = 0
    total_bytes: int = 0
    verify: VerifyReport
    architecture: str | None = None
    model_type: str | None = None
    seconds: float = 0.0
    warnings: list[str] = Field(default_factory=list)
    llmdeck_version: str = __version__
    huggingface_hub_version: str | None = None
    page_cache_dropped_bytes: int = Field(0, description="What the download left in page cache, dropped")


def _ignore(_: str) -> None:
    return None


def validate_repo_id(repo_id: str) -> str:
    """Return ``repo_id`` if it looks like ``owner/name`` (or a bare ``name``), else raise UsageError."""
    value = repo_id.strip()
    if value.startswith(("http://", "https://")):
        tail = re.sub(r"^https?://[^/]+/", "", value).split("/tree/")[0].strip("/")
        raise UsageError(
            f"{repo_id!r} is a URL; `llmdeck fetch` takes a repo id like Qwen/Qwen3-0.6B.",
            hint=f"Try `llmdeck fetch {tail}`; set a mirror with --endpoint.",
        )
    if value.startswith((".", "/", "~")) or Path(value).expanduser().exists():
        raise UsageError(
            f"{repo_id!r} looks like a local path; `llmdeck fetch` downloads a Hub repo id like "
            "Qwen/Qwen3-0.6B.",
            hint="A local model folder needs no fetch: pass it to `llmdeck up --model`.",
        )
    if not REPO_ID_RE.match(value) or "--" in value or ".." in value:
        raise UsageError(
            f"{repo_id!r} is not a valid Hugging Face repo id: it must be `owner/name` (letters, digits, "
            "'-', '_', '.'; at most 96 characters each, no '--' or '..').",
            hint="For example: llmdeck fetch Qwen/Qwen3-0.6B",
        )
    return value


def validate_endpoint(endpoint: str) -> str:
    """The hub endpoint without a trailing ``/``; UsageError (exit 2) unless it is a usable http(s) URL."""
    from llmdeck.util.net import parse_http_url

    value = endpoint.strip().rstrip("/")
    if not re.match(r"^https?://", value) or any(is_unsafe(c) or c in "\n\t" for c in value):
        raise UsageError(
            f"--endpoint {endpoint!r} is not a usable http(s) URL.",
            hint="Give an http(s) URL, for example --endpoint https://hf-mirror.com",
        )
    return parse_http_url(value, what="--endpoint", example="--endpoint https://hf-mirror.com")


def environment_warnings(env: Mapping[str, str] | None = None) -> list[str]:
    """Warnings about variables that break or bend downloads (seed 004 §2: check them first)."""
    env = os.environ if env is None else env
    warnings: list[str] = []
    offline = offline_set(env)
    if offline:
        warnings.append(
            f"{' and '.join(offline)} {'is' if len(offline) == 1 else 'are'} set: huggingface_hub will not "
            f"download anything. Unset {'it' if len(offline) == 1 else 'them'} before fetching: "
            f"`unset {' '.join(OFFLINE_VARS)}`."
        )
    proxies = [v for v in PROXY_VARS if env.get(v)]
    if proxies:
        warnings.append(
            f"Proxy variables are set ({', '.join(proxies)}); downloads go through them. If the download "
            f"fails, check the proxy or unset them: `unset {' '.join(PROXY_VARS)}`."
        )
    return warnings


def default_local_dir(models_dir: Path, repo_id: str) -> Path:
    """``models_dir / NAME`` for ``owner/NAME`` (seed 004's ~/.cache/huggingface/models layout)."""
    return Path(models_dir).expanduser() / repo_id.split("/")[-1]


def map_hub_error(exc: BaseException, repo_id: str, endpoint: str, revision: str | None) -> LlmdeckError:
    """Turn a huggingface_hub (or network) exception into an llmdeck error with a hint."""
    from huggingface_hub import errors as hub_errors

    where = f"on {endpoint}"
    if isinstance(exc, hub_errors.GatedRepoError):
        return UsageError(
            f"{repo_id} is a gated repo {where}: you must accept its terms and be logged in to download it.",
            hint=f"Accept the terms at {endpoint}/{repo_id}, then `hf auth login` and retry.",
        )
    if isinstance(exc, hub_errors.RepositoryNotFoundError):
        return UsageError(
            f"The repo {repo_id} was not found {where} (or it is private and you are not logged in).",
            hint="Check the spelling (owner/name, case matters) on the model page; for a private repo "
            "set HF_TOKEN or run `hf auth login`.",
        )
    if isinstance(exc, hub_errors.RevisionNotFoundError):
        return UsageError(
            f"The revision {revision!r} does not exist in {repo_id} {where}.",
            hint="Use a branch, tag or commit hash that exists (default: main), or drop --revision.",
        )
    if isinstance(exc, hub_errors.DisabledRepoError):
        return UsageError(f"The repo {repo_id} has been disabled {where}.", hint="Pick another repo.")
    if isinstance(exc, hub_errors.HFValidationError):
        return UsageError(f"{repo_id!r} is not a valid repo id: {exc}", hint="Use owner/name.")
    if isinstance(exc, hub_errors.LocalEntryNotFoundError):
        said = "HF_HUB_OFFLINE" in str(exc) or "outgoing traffic has been disabled" in str(exc)
        if said or offline_set():  # as huggingface_hub read the environment
            return offline_error(repo_id)
        return DownloadError(
            f"Cannot reach {endpoint} to download {repo_id}, and no complete copy is on disk "
            f"({str(exc).splitlines()[0]}).",
            hint="Check the network (and any proxy variables). " + MIRROR_HINT,
        )
    if isinstance(exc, hub_errors.HfHubHTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status == 401:
            return UsageError(
                f"{endpoint} refused access to {repo_id} (HTTP 401): it needs a valid token.",
                hint="Set HF_TOKEN or run `hf auth login`, then retry.",
            )
        return DownloadError(
            f"The hub at {endpoint} failed while downloading {repo_id}: {str(exc).splitlines()[0]}",
            hint="Run the same command again: the files already whole are kept. " + MIRROR_HINT,
        )
    if isinstance(exc, json.JSONDecodeError):  # a later question of the hub's client answered by a page
        return not_a_hub(endpoint, repo_id, f"a reply that is not JSON: {received(exc.doc.encode())}")
    return other_failure(exc, repo_id, endpoint)


def _ask_first(
    env: Mapping[str, str], endpoint: str, repo_id: str, revision: str | None, limit: float, on_wait: Any
) -> HubFiles | None:
    """Online: the hub answers about the repo (bounded), and its files' sizes and hashes (None offline
    or unknown)."""
    if offline_set(env):
        return None
    check_answers(endpoint, repo_id, revision, limit, on_wait)
    return hub_files(endpoint, repo_id, revision, limit)


def check_answers(
    endpoint: str, repo_id: str, revision: str | None, limit: float, on_wait: Callable[[str], None] = _ignore
) -> None:
    """Ask the hub about the repo first, bounded as a whole: a silent or trickling endpoint is a
    DownloadError (exit 1) after ``limit`` s, where huggingface_hub would wait without end, and so is
    a 200 that is not the hub's JSON (a login page). Any other answer (even 401/404) is fine here:
    snapshot_download then says what it means. ``on_wait`` gets the progress line (no URL password)."""
    from llmdeck.fetch.hubcap import HUB_JSON_CAP, HUB_WHAT
    from llmdeck.util.http import Redirected, bounded_get

    on_wait(f"asking {redact_url(endpoint)} about {repo_id} (up to {limit:g} s)")
    url = f"{endpoint}/api/models/{repo_id}/revision/{revision or 'main'}"
    token = os.environ.get("HF_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else None
    try:  # capped: an endless answer here is what snapshot_download would read into memory
        status, body = bounded_get(url, limit=limit, headers=headers, cap=HUB_JSON_CAP, what=HUB_WHAT)
    except NotAnswering as exc:
        raise DownloadError(
            f"{endpoint} is not answering: no complete reply about {repo_id} within {limit:g} s.",
            hint="Check the network and the endpoint, or raise --timeout if it is just slow. " + MIRROR_HINT,
        ) from exc
    except (BodyTooLarge, Redirected) as exc:
        raise DownloadError(
            exc.message,
            hint="Check --endpoint (or HF_ENDPOINT): it should be the hub or a mirror. " + MIRROR_HINT,
        ) from exc
    except Exception:  # unreachable, TLS, ...: snapshot_download reports those with its own words
        return
    check_hub_reply(endpoint, repo_id, status, body)


def _import_hub() -> Any:
    try:
        import huggingface_hub
        from huggingface_hub import snapshot_download  # noqa: F401  (fails early on a broken install)
    except ImportError as exc:
        raise MissingDependencyError(
            "`llmdeck fetch` needs huggingface_hub, which is not installed.",
            hint="Install it with: pip install 'llmdeck[hub]'",
        ) from exc
    return huggingface_hub


def _patterns(config_only: bool, include: list[str] | None) -> list[str] | None:
    if config_only:
        return list(CONFIG_ONLY_PATTERNS) + list(include or [])
    if include:
        return list(include)
    return None


def _download(
    hub: Any,
    repo_id: str,
    revision: str | None,
    target: Path,
    patterns: list[str] | None,
    endpoint: str,
    api_limit: float,
) -> None:
    from llmdeck.fetch.hubcap import CONFIG_FILE_TIMES, capped_hub_client

    config_only = patterns == list(CONFIG_ONLY_PATTERNS)
    try:
        with capped_hub_client(hub, config_only=config_only, api_limit=api_limit):
            hub.snapshot_download(
                repo_id,
                revision=revision,
                local_dir=str(target),
                allow_patterns=patterns,
                endpoint=endpoint,
            )
    except BodyTooLarge as exc:
        raise DownloadError(exc.message, hint=_ENDPOINT_HINT + MIRROR_HINT) from exc
    except NotAnswering as exc:
        limit = api_limit * (1 if "/api/" in str(exc) else CONFIG_FILE_TIMES)
        raise DownloadError(
            f"{endpoint} is not answering: no complete reply to {exc} within {limit:g} s.",
            hint="Check the network and the endpoint, or raise --timeout if it is just slow. " + MIRROR_HINT,
        ) from exc
    except LlmdeckError:
        raise
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        raise map_hub_error(exc, repo_id, endpoint, revision) from exc


def _architecture(target: Path, report: Any) -> tuple[str | None, str | None]:
    """The model's architecture and model_type from its config.json (a note when it is invalid)."""
    if (target / "config.json").is_file():
        from llmdeck.model.inspect import validate_model_dir

        try:
            info = validate_model_dir(target)
            return info.architecture, info.model_type
        except UsageError as exc:
            report.notes.append(f"config.json: {exc.message}")
    return None, None


def _target(local_dir: Path | None, models_dir: Path, repo_id: str) -> Path:
    target = Path(local_dir).expanduser() if local_dir else default_local_dir(models_dir, repo_id)
    if target.exists() and not target.is_dir():
        raise UsageError(f"--local-dir {target} exists and is not a directory.", hint="Pick a folder.")
    if target.is_symlink() and not target.exists():  # a loop, or a link to nothing: not the network's doing
        raise UsageError(f"--local-dir {target} is a symlink that leads to no folder.", hint="Pick a folder.")
    return target


def _warn_all(env: Mapping[str, str], warn: Callable[[str], None] | None) -> list[str]:
    warnings = environment_warnings(env)
    for message in warnings:
        if warn:
            warn(message)
    return warnings


def fetch_model(
    repo_id: str,
    *,
    models_dir: Path,
    local_dir: Path | None = None,
    revision: str | None = None,
    endpoint: str | None = None,
    include: list[str] | None = None,
    config_only: bool = False,
    warn: Callable[[str], None] | None = None,
    env: Mapping[str, str] | None = None,
    answer_timeout_s: float = 30.0,
    on_wait: Callable[[str], None] | None = None,
    keep_page_cache: bool = False,
    checksum: bool = False,
) -> FetchResult:
    """Download ``repo_id`` into ``local_dir`` (default ``models_dir / NAME``) and verify it (with
    ``checksum``, every LFS file's sha256 against the hub's). UsageError: a bad repo id or endpoint, a
    missing/gated repo or revision, offline; MissingDependencyError: no huggingface_hub; DownloadError
    (exit 1): network failures, files that do not verify. What it downloaded leaves page cache unless
    ``keep_page_cache`` (unified memory counts that cache against the next start: vllm #48140)."""
    repo_id = validate_repo_id(repo_id)
    env = os.environ if env is None else env
    effective_endpoint = validate_endpoint(endpoint or env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT)
    target = _target(local_dir, models_dir, repo_id)
    huggingface_hub = _import_hub()
    warnings = _warn_all(env, warn)
    patterns = _patterns(config_only, include)

    started = time.monotonic()
    hub = _ask_first(env, effective_endpoint, repo_id, revision, answer_timeout_s, on_wait or _ignore)
    refuse_files_not_from_the_hub(target, hub.sizes if hub else None)  # hf replaces a user's file unasked
    _download(huggingface_hub, repo_id, revision, target, patterns, effective_endpoint, answer_timeout_s)

    if checksum and hub and hub.sha256 and on_wait:
        on_wait(f"comparing the sha256 of the {len(hub.sha256)} files the hub hashes with the hub's")
    fetched = {"require_shards": not (config_only or include), "config_only": config_only}
    report = verify_download(target, repo_id, hub, endpoint=effective_endpoint, checksum=checksum, **fetched)
    files = [p for p in target.rglob("*") if p.is_file() and ".cache" not in p.relative_to(target).parts]
    refuse_nothing_matched(include, files)
    arch, model_type = _architecture(target, report)
    return FetchResult(
        repo_id=repo_id,
        revision=revision,
        endpoint=redact_url(effective_endpoint),  # shown and printed: a URL's password hidden
        local_dir=str(target.resolve()),
        config_only=config_only,
        include=list(include or []),
        files=len(files),
        total_bytes=sum(p.stat().st_size for p in files),
        verify=report,
        architecture=arch,
        model_type=model_type,
        seconds=round(time.monotonic() - started, 2),
        warnings=warnings,
        huggingface_hub_version=str(huggingface_hub.__version__),
        page_cache_dropped_bytes=0 if keep_page_cache else drop_files(files),
    )
