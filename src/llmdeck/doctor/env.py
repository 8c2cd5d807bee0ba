"""Doctor probes of the environment: Hugging Face variables and proxies (secrets never printed)."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path

from llmdeck.doctor.model import DoctorFinding
from llmdeck.util.redact import redact_text, redact_url

TOKEN_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
LOCAL_NAMES = ("localhost", "127.0.0.1")
TRUE = {"1", "true", "yes", "on"}


def hide_password(url: str) -> str:
    """``http://user:secret@proxy:3128`` -> ``http://user:<redacted>@proxy:3128``, and a key in the query
    (``?token=X``) hidden too: the doctor prints these variables (the one redaction rule)."""
    return redact_text(redact_url(url))


def probe_hf(env: Mapping[str, str], *, has_hf_transfer: bool | None = None) -> list[DoctorFinding]:
    endpoint = hide_password(env.get("HF_ENDPOINT", ""))
    token = next((v for v in TOKEN_VARS if env.get(v)), None)
    offline = [v for v in OFFLINE_VARS if env.get(v, "").lower() in TRUE]
    data = {
        "HF_ENDPOINT": endpoint or None,
        "HF_HOME": env.get("HF_HOME"),
        "token": f"{token} is set (hidden)" if token else None,
        "offline": offline,
    }
    parts = [f"HF_ENDPOINT={endpoint}" if endpoint else "HF_ENDPOINT not set (huggingface.co)"]
    parts.append(f"token in {token} (hidden)" if token else "no HF token (gated models need one)")
    out = [DoctorFinding(id="hf", area="hf", status="ok", message="; ".join(parts) + ".", data=data)]
    if endpoint and not endpoint.startswith(("http://", "https://")):
        out.append(
            DoctorFinding(
                id="hf-endpoint-invalid",
                area="hf",
                status="fail",
                message=f"HF_ENDPOINT={endpoint!r} is not a URL: every download will fail.",
                fix="Set it to a full URL (`export HF_ENDPOINT=https://hf-mirror.com`) or unset it.",
            )
        )
    out += _hf_folders(env)
    if offline:
        out.append(
            DoctorFinding(
                id="hf-offline",
                area="hf",
                status="warn",
                message=f"{', '.join(offline)} is on: `llmdeck fetch` and hub model ids cannot download; "
                "only local folders serve.",
                fix=f"Unset {' and '.join(offline)} to download, or serve a local model folder.",
            )
        )
    if env.get("HF_HUB_ENABLE_HF_TRANSFER", "").lower() in TRUE:
        if has_hf_transfer is None:
            has_hf_transfer = importlib.util.find_spec("hf_transfer") is not None
        if not has_hf_transfer:
            out.append(
                DoctorFinding(
                    id="hf-transfer-missing",
                    area="hf",
                    status="warn",
                    message="HF_HUB_ENABLE_HF_TRANSFER=1 (seed 000's download line) but the hf_transfer "
                    "package is not installed in this Python.",
                    fix="`pip install hf_transfer`, or unset HF_HUB_ENABLE_HF_TRANSFER.",
                )
            )
    return out


def _hf_folders(env: Mapping[str, str]) -> list[DoctorFinding]:
    """HF_HOME / HF_HUB_CACHE that is a file, or under one: huggingface_hub cannot cache a download
    there, and `up --engine docker` mounts HF_HOME as a folder (docker refuses a file)."""
    out = []
    for var in ("HF_HOME", "HF_HUB_CACHE"):
        value = env.get(var)
        if not value:
            continue
        path = Path(value).expanduser()
        blocker = next((p for p in (path, *path.parents) if p.exists()), None)
        if blocker is not None and not blocker.is_dir():
            where = "is a file" if blocker == path else f"is under {blocker}, which is a file"
            out.append(
                DoctorFinding(
                    id=f"{var.lower().replace('_', '-')}-not-a-folder",
                    area="hf",
                    status="fail",
                    message=f"{var}={value} {where}, not a folder: no model can be downloaded or cached "
                    "there, and the docker engine cannot mount it.",
                    fix=f"Point {var} at a folder (unset: ~/.cache/huggingface), or move that file away.",
                )
            )
    return out


def probe_proxies(env: Mapping[str, str]) -> list[DoctorFinding]:
    proxies = {k: hide_password(v) for k, v in env.items() if k in PROXY_VARS and v}
    if not proxies:
        return [DoctorFinding(id="proxy", area="proxy", status="ok", message="No proxy variables set.")]
    no_proxy = env.get("NO_PROXY", env.get("no_proxy", ""))
    listed = {p.strip() for p in no_proxy.split(",")}
    missing = [n for n in LOCAL_NAMES if n not in listed]
    desc = ", ".join(f"{k}={v}" for k, v in proxies.items())
    if missing:
        return [
            DoctorFinding(
                id="proxy-local-not-excluded",
                area="proxy",
                status="warn",
                message=f"Proxies are set ({desc}) but NO_PROXY lacks {', '.join(missing)}: clients "
                "that honour the variables (httpx, the OpenAI SDK, curl) send requests for the local "
                "server to the proxy.",
                fix="`export NO_PROXY=localhost,127.0.0.1,::1` (and no_proxy) before starting clients.",
                data={"proxies": proxies, "no_proxy": no_proxy},
            )
        ]
    return [
        DoctorFinding(
            id="proxy",
            area="proxy",
            status="ok",
            message=f"Proxies set ({desc}); NO_PROXY excludes the local server.",
            data={"proxies": proxies, "no_proxy": no_proxy},
        )
    ]
