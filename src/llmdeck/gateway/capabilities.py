"""What a route's model can do, as Ollama's ``/api/show`` says it in ``capabilities``: read from each
backend's vLLM flags and model (a launch spec the gateway starts, or a server llmdeck started), or as a
``url:`` backend's config declares them; a URL whose flags are not known and that declares nothing counts
as ``completion, tools``. Clients pick a model for tool calls, images or embeddings by them."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmdeck.gateway.backend_config import ResolvedBackend

# Ollama's names, in the order its Model.Capabilities() adds them (server/images.go); its own `ollama launch`
# gives OpenClaw and Codex image input for `vision` and reasoning for `thinking`
_CAPABILITIES = ("completion", "embedding", "vision", "tools", "thinking")
UNKNOWN_CAPABILITIES = ["completion", "tools"]  # a backend whose flags are not known (a URL)
_NO_IMAGES = re.compile(r"""["']?image["']?\s*[:=]\s*0(?![\d.])""")  # --limit-mm-per-prompt '{"image": 0}'


def capabilities(backends: list[tuple[list[str], bool]]) -> list[str]:
    """``/api/show``'s ``capabilities`` of a model served with these vLLM flags, each with whether its
    model carries a vision tower (one pair a backend): what every backend can do. Clients pick a model for
    tool calls, images or embeddings by them (ollama-python's issue #494, ellmer's `models_ollama()`, Open
    WebUI's image upload): ``tools`` only with ``--enable-auto-tool-choice`` (vLLM refuses a request's
    tools without it), ``thinking`` with ``--reasoning-parser``, ``vision`` for a vision tower not turned
    off (``--language-model-only``, ``--limit-mm-per-prompt`` with no image); a pooling runner embeds
    only."""
    return _common([_capabilities(flags, vision) for flags, vision in backends])


def _capabilities(args: list[str], vision: bool) -> set[str]:
    from llmdeck.errors import LlmdeckError
    from llmdeck.plan.flags import parse_vllm_flags

    try:
        flags = parse_vllm_flags(args)
    except LlmdeckError:  # flags the server took though llmdeck cannot read them: the least is claimed
        return {"completion"}
    if flags.get("runner") == "pooling" or flags.get("convert") == "embed" or flags.get("task") == "embed":
        return {"embedding"}
    found = {"completion"}
    if flags.get_bool("enable-auto-tool-choice"):
        found.add("tools")
    if isinstance(flags.get("reasoning-parser"), str):
        found.add("thinking")
    limit = flags.get("limit-mm-per-prompt")
    images_off = isinstance(limit, str) and _NO_IMAGES.search(limit) is not None
    if vision and not flags.get_bool("language-model-only") and not images_off:
        found.add("vision")
    return found


def route_capabilities(backends: Iterable[ResolvedBackend]) -> list[str]:
    """What every backend of a route whose capabilities are known can do; none known: the assumed ones."""
    return _common([found for b in backends if (found := backend_capabilities(b)) is not None])


def _common(known: list[set[str]]) -> list[str]:
    """What every one of these can do, in Ollama's order; none known: the assumed ones."""
    if not known:
        return list(UNKNOWN_CAPABILITIES)
    found = set.intersection(*known)
    return [c for c in _CAPABILITIES if c in found]


def backend_capabilities(backend: ResolvedBackend) -> set[str] | None:
    """A backend's capabilities as declared (``url:``), else from the vLLM flags and model of the launch
    spec it starts or the server it follows (while that server runs); None when not known."""
    from llmdeck.formats.model_folder import has_vision_tower
    from llmdeck.gateway.lifecycle import live_in

    if backend.capabilities is not None:
        return set(backend.capabilities)
    spec = backend.managed.spec if backend.managed is not None else None
    follow = backend.follow
    if spec is None and follow is not None and (record := live_in(follow.servers_dir, follow.server)):
        spec = record.spec
    if spec is None:
        return None
    return _capabilities(list(spec.vllm_args), has_vision_tower(spec.model))
