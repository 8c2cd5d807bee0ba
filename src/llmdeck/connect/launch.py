"""`llmdeck launch`: a client configured for the live server in its own environment, then exec'd.

Nothing of the user's is rewritten: each client gets what it reads with the highest precedence,
so that the user's own settings cannot point this one run elsewhere (each checked with the real
client against a capture server, see agents.py):

- Claude Code: the env block in a settings file of llmdeck's passed as ``--settings FILE`` (it wins
  over ``~/.claude/settings.json``'s env block), and the same variables in its environment;
- Codex: ``-c key=value`` overrides (a provider ``llmdeck`` with ``env_key = "LLMDECK_API_KEY"``:
  the key travels in the environment, never on the command line);
- Qwen Code: ``QWEN_CODE_SYSTEM_SETTINGS_PATH`` → a settings file of llmdeck's (system settings win
  over the user's; ``envKey`` LLMDECK_API_KEY);
- opencode: ``OPENCODE_CONFIG_CONTENT`` (wins over the project's opencode.json; the key as
  ``{env:LLMDECK_API_KEY}``), ``OPENCODE_DISABLE_AUTOUPDATE`` / ``_MODELS_FETCH`` / ``_SHARE``;
- aider: ``AIDER_*`` variables (configargparse: they win over .aider.conf.yml) and a model metadata
  file of llmdeck's.

The files are under ``<state_dir>/launch/<client>/`` (0600: they may hold the key).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from llmdeck.connect import agents
from llmdeck.connect.configs import ServeInfo, opencode_config
from llmdeck.errors import UsageError

LAUNCH_CLIENTS: dict[str, str] = {
    "claude-code": "claude",
    "codex": "codex",
    "qwen-code": "qwen",
    "opencode": "opencode",
    "aider": "aider",
}
KEY_VAR = "LLMDECK_API_KEY"
PROVIDER = "llmdeck"


class LaunchPlan(BaseModel):
    """What `llmdeck launch` runs: the argv, the environment it changes, the files it wrote."""

    kind: str = "llmdeck.launch"
    client: str
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict, description="Variables set for the client.")
    unset: list[str] = Field(default_factory=list, description="Variables removed for the client.")
    files: dict[str, Any] = Field(default_factory=dict, description="llmdeck's files: path -> content.")
    notes: list[str] = Field(default_factory=list)
    server: ServeInfo

    def child_env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        for name in self.unset:
            env.pop(name, None)
        env.update(self.env)
        return env

    def shown(self) -> dict[str, Any]:
        """The plan with every secret redacted (for --dry-run / --json)."""
        from llmdeck.util.redact import hide_key, redact_argv, redact_data

        data = self.model_dump(mode="json")
        key = self.server.api_key
        if key:
            data = hide_key(data, key)  # in the strings, never the JSON text (a key `true` had broken it)
        data["argv"] = redact_argv(data["argv"])
        return dict(redact_data(data))


def find_binary(client: str, bin_path: str | None) -> str:
    """The client's executable: ``--bin``, else its name on PATH; UsageError (exit 2) with the pinned
    install command when there is none."""
    if client not in LAUNCH_CLIENTS:
        raise UsageError(
            f"llmdeck cannot launch {client!r}.", hint=f"Use one of: {', '.join(LAUNCH_CLIENTS)}."
        )
    name = bin_path or LAUNCH_CLIENTS[client]
    found = shutil.which(name)
    if found is None:
        where = f"{bin_path} is not an executable file" if bin_path else f"`{name}` is not on PATH"
        raise UsageError(
            f"Cannot launch {client}: {where}.",
            hint=f"Install it with `{agents.PACKAGES[client]}`, or give its path with --bin.",
        )
    return found


def _codex_overrides(info: ServeInfo) -> list[str]:
    pairs: dict[str, Any] = {
        f"model_providers.{PROVIDER}.name": f"llmdeck ({info.model})",
        f"model_providers.{PROVIDER}.base_url": info.api_base,
        f"model_providers.{PROVIDER}.wire_api": "responses",
        "model": info.model,
        "model_provider": PROVIDER,
        "model_context_window": info.context,
        "model_auto_compact_token_limit": agents.codex_auto_compact(info),
        "check_for_update_on_startup": False,
        "analytics.enabled": False,
        "feedback.enabled": False,
        "features.plugins": False,
    }
    if info.api_key:
        pairs[f"model_providers.{PROVIDER}.env_key"] = KEY_VAR
    argv: list[str] = []
    for key, value in pairs.items():
        # the value is TOML: a JSON string is a TOML basic string, true/false and integers are the same
        argv += ["-c", f"{key}={json.dumps(value)}"]
    return argv


def _opencode_content(info: ServeInfo) -> str:
    doc = opencode_config(info.model_copy(update={"api_key": None}), PROVIDER, "server")
    doc.pop("$schema", None)
    if info.api_key:
        doc["provider"][PROVIDER]["options"]["apiKey"] = "{env:" + KEY_VAR + "}"
    doc["model"] = f"{PROVIDER}/{info.model}"
    return json.dumps(doc, ensure_ascii=False)


def plan_launch(
    client: str,
    binary: str,
    info: ServeInfo,
    state_dir: Path,
    args: list[str],
    small_model: str | None = None,
) -> LaunchPlan:
    """The argv, environment and llmdeck-owned files that run ``client`` against ``info``; the files in
    a folder of this process's own (the client runs as this pid): a second launch of the same client
    had rewritten the settings a running one still reads."""
    folder = state_dir / "launch" / client / str(os.getpid())
    key_env = {KEY_VAR: info.api_key} if info.api_key else {}
    plan = LaunchPlan(client=client, argv=[binary], server=info)
    if client == "claude-code":
        env = agents.claude_env(info, small_model=small_model)
        settings = folder / "settings.json"
        plan.files[str(settings)] = {"env": env}
        plan.env = {k: v for k, v in env.items() if v != ""}
        plan.unset = [k for k, v in env.items() if v == ""]
        plan.argv += ["--settings", str(settings)]
    elif client == "codex":
        plan.argv += _codex_overrides(info)
        plan.env = key_env
        plan.notes.append("Codex sends no max_output_tokens: the server's own limit applies.")
    elif client == "qwen-code":
        settings = folder / "settings.json"
        block = agents.qwen_settings(info, KEY_VAR)
        del block["env"]
        plan.files[str(settings)] = block
        plan.env = {"QWEN_CODE_SYSTEM_SETTINGS_PATH": str(settings), KEY_VAR: info.api_key or agents.NO_KEY}
        plan.notes.append("Qwen Code reads llmdeck's file as its system settings for this run.")
    elif client == "opencode":
        plan.env = {
            "OPENCODE_CONFIG_CONTENT": _opencode_content(info),
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_SHARE": "1",
            **key_env,
        }
    else:
        meta = folder / "model.metadata.json"
        plan.files[str(meta)] = agents.aider_metadata(info)
        plan.env = {
            "AIDER_MODEL": agents.aider_model(info),
            "AIDER_OPENAI_API_BASE": info.api_base,
            "AIDER_OPENAI_API_KEY": info.api_key or agents.NO_KEY,
            "AIDER_MODEL_METADATA_FILE": str(meta),
            "AIDER_CHECK_UPDATE": "false",
            "AIDER_ANALYTICS": "false",
        }
    plan.argv += args
    if info.client_budget:
        plan.notes.append(info.client_budget)
    return plan


def _prune(launches: Path) -> None:
    """Remove the folders of launches whose process has ended (llmdeck's own, named by their pid)."""
    import shutil

    import psutil

    for folder in launches.glob("*/[0-9]*"):
        ours = folder.name.isdigit() and folder.is_dir() and not folder.is_symlink()
        if ours and not psutil.pid_exists(int(folder.name)):
            shutil.rmtree(folder, ignore_errors=True)


def write_files(plan: LaunchPlan) -> None:
    """llmdeck's own files for this launch, atomically and 0600 (they may hold the key)."""
    if plan.files:
        _prune(Path(next(iter(plan.files))).parents[2])  # <state>/launch: the ended launches' folders
    from llmdeck.util.atomic import atomic_write_text
    from llmdeck.util.localfile import ensure_dir

    for path, content in plan.files.items():
        target = Path(path)
        ensure_dir(target.parent)  # 0700, and so is each folder made above it (the state root)
        atomic_write_text(target, json.dumps(content, indent=2, ensure_ascii=False) + "\n", secret=True)


def _sweep_after(plan: LaunchPlan) -> None:
    """This launch's folder removed once the client (this pid, after the exec) has exited."""
    from llmdeck.engines.process import spawn_module
    from llmdeck.util.after_exit import start_tick

    tick = start_tick(os.getpid())
    if plan.files and tick is not None:  # off Linux the next launch's prune removes it
        folder = str(Path(next(iter(plan.files))).parent)
        spawn_module("llmdeck.util.after_exit", [str(os.getpid()), tick, folder])


def exec_client(plan: LaunchPlan) -> None:
    """Replace this process with the client (its exit status is then the command's)."""
    write_files(plan)
    _sweep_after(plan)
    try:
        os.execve(plan.argv[0], plan.argv, plan.child_env())
    except OSError as exc:  # no #! line, an interpreter that is not there, no permission
        raise UsageError(
            f"Cannot start {plan.argv[0]}: {exc.strerror or exc}.",
            hint="Give --bin an executable program (a script needs a first line `#!` naming an "
            "interpreter that exists), or install the client.",
        ) from None
