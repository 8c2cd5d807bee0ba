"""Secrets in a launch spec leave argv for the environment.

``llmdeck up -- --api-key X`` would put X in the process table (``ps``), the log header, the server
record and the ``docker run`` line. :func:`split_secrets` takes it out of the spec and returns it as
the variable vLLM reads instead (``--api-key`` -> ``VLLM_API_KEY``, ``--hf-token`` -> ``HF_TOKEN``);
secret variables of ``spec.env`` (``HF_TOKEN``, ``*_API_KEY`` …, and a value with a URL's password)
move the same way. The clean spec is
what llmdeck stores and shows; the secrets go only to the engine's environment and to a 0600 file.
"""

from __future__ import annotations

from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import UsageError
from llmdeck.util.redact import (
    REDACTED,
    SECRET_FLAGS,
    api_key_problem,
    is_secret_flag,
    is_secret_name,
    redact_url,
    secret_flag,
)


def split_secrets(spec: LaunchSpec) -> tuple[LaunchSpec, dict[str, str]]:
    """(the spec without secrets, the secret variables to give the engine)."""
    secrets: dict[str, str] = {}
    args: list[str] = []
    argv = list(spec.vllm_args)
    i = 0
    while i < len(argv):
        arg = argv[i]
        flag, eq, value = arg.partition("=")
        i += 1
        if not (flag.startswith("--") and is_secret_flag(flag)):
            args.append(arg)
            continue
        if not eq:
            if i >= len(argv) or argv[i].startswith("--"):  # a flag without a value: nothing secret
                args.append(arg)
                continue
            value, i = argv[i], i + 1
            if i < len(argv) and not argv[i].startswith("-"):  # --api-key K1 K2: vLLM takes several
                raise UsageError(
                    f"{flag} is given several values; llmdeck passes one secret to the engine, through "
                    "its environment (a second one would stay on the command line, for `ps` to show).",
                    hint="Give one key, or put the gateway in front (`llmdeck keys create NAME`) for one "
                    "key per client.",
                )
        whole = secret_flag(flag)  # --api-ke is --api-key to vLLM: its value leaves argv the same way
        if whole is None:  # a flag vLLM has no variable for: kept (redacted when shown)
            args += [flag, value]
            continue
        secrets[SECRET_FLAGS[whole]] = value
    if (why := api_key_problem(secrets.get("VLLM_API_KEY", ""))) is not None:
        raise UsageError(
            f"The API key given to the server cannot be used: {why}; no client could send it.",
            hint="Give the key as plain ASCII without spaces, e.g. one from `openssl rand -hex 24`.",
        )
    # a secret name, or a value holding a URL's password (HTTPS_PROXY=http://user:pw@proxy:3128)
    hidden = {k for k, v in spec.env.items() if is_secret_name(k) or redact_url(v) != v}
    env = {k: v for k, v in spec.env.items() if k not in hidden}
    secrets.update({k: v for k, v in spec.env.items() if k in hidden})
    if REDACTED in secrets.values() or REDACTED in args:
        raise UsageError(
            "This launch spec holds a redacted secret (<redacted>), not the secret itself.",
            hint="Pass the key when starting: `VLLM_API_KEY=... llmdeck up --spec FILE` "
            "(or `-- --api-key ...`).",
        )
    return spec.model_copy(update={"vllm_args": args, "env": env}), secrets
