"""``make_tiny_model``: a tiny random-weight Qwen3ForCausalLM with a real Qwen3 tokenizer.

It is what the embedded CPU engine serves in demos and tests: the architecture, vocabulary,
tokenizer, added tokens and chat template are Qwen3's, only the weights are random and the model
is small (2 layers, hidden 128: about 20 M parameters, most of them the tied embedding).
"""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from llmdeck import __version__
from llmdeck.errors import AlreadyExistsError, ModelPathError
from llmdeck.util.atomic import atomic_write_json
from llmdeck.util.jsonsafe import loads as _json_loads
from llmdeck.util.owned import clear_made_dir, mark_made, refuse_unless_made, seal_made

MARKER_FILE = "llmdeck-tiny.json"
MARKER_SCHEMA_VERSION = 1
LEGACY_MARKERS = ((MARKER_FILE, "llmdeck-tiny"),)  # folders made before the .llmdeck-made marker
VOCAB_SIZE = 151936
MAX_POSITION_EMBEDDINGS = 40960
HEAD_DIM = 32
IM_END_ID = 151645  # <|im_end|>: what ends a chat turn


class TinyModelInfo(BaseModel):
    """What ``make_tiny_model`` made; also written to ``llmdeck-tiny.json`` in the model dir."""

    schema_version: int = MARKER_SCHEMA_VERSION
    kind: str = "llmdeck-tiny"
    path: str
    architecture: str = "Qwen3ForCausalLM"
    model_type: str = "qwen3"
    layers: int
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    dtype: str
    seed: int
    eos_bias: float | None = None
    parameters: int
    tokenizer_checked_strings: int
    files: list[str] = Field(default_factory=list)
    seconds: float
    llmdeck_version: str = __version__
    transformers_version: str | None = None
    host: dict[str, str] = Field(default_factory=dict)


def is_tiny_model(dir: Path) -> bool:
    """True if ``dir`` holds a complete model made by :func:`make_tiny_model`."""
    dir = Path(dir)
    marker = dir / MARKER_FILE
    if not marker.is_file() or not (dir / "config.json").is_file():
        return False
    try:
        data = _json_loads(marker.read_text("utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(data, dict) or data.get("kind") != "llmdeck-tiny":
        return False
    files = data.get("files") or []
    return all((dir / name).is_file() for name in files)


def _check_target(dir: Path, force: bool) -> None:
    if dir.exists() and not dir.is_dir():
        raise ModelPathError(
            f"{dir} exists and is not a directory; make-tiny needs a directory to write the model into.",
            hint="Pick another path.",
        )
    existing = next((p for p in dir.parents if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise ModelPathError(
            f"Cannot make {dir}: {existing} is a file, not a folder, so no folder can be made under it.",
            hint="Pick a path under a folder, or move that file away.",
        )
    if not dir.is_dir() or not any(dir.iterdir()):
        return
    if not force:
        raise AlreadyExistsError(
            f"{dir} is not empty; make-tiny will not write a model over existing files.",
            hint="Pass --force to replace a tiny model llmdeck made there, or pick an empty or new folder.",
        )
    # --force replaces only what llmdeck made (its marker is there), never the user's files.
    refuse_unless_made(dir, "tiny model", LEGACY_MARKERS)


def _model_config(layers: int, hidden: int) -> dict[str, Any]:
    heads = max(1, hidden // HEAD_DIM)
    kv_heads = max(1, heads // 2)
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "pad_token_id": 151643,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "hidden_size": hidden,
        "initializer_range": 0.02,
        "intermediate_size": hidden * 2,
        "max_position_embeddings": MAX_POSITION_EMBEDDINGS,
        "max_window_layers": layers,
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "num_key_value_heads": kv_heads,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000,
        "sliding_window": None,
        "tie_word_embeddings": True,
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": VOCAB_SIZE,
    }


def _random_weights(config: dict[str, Any], rng: Any) -> dict[str, Any]:
    """Qwen3ForCausalLM's tensors under Hugging Face names: N(0, 0.02) matrices, norms of ones.

    The embedding is tied to the LM head, so there is no ``lm_head.weight``.
    """
    import numpy as np

    hidden = int(config["hidden_size"])
    head_dim = int(config["head_dim"])
    q_dim = int(config["num_attention_heads"]) * head_dim
    kv_dim = int(config["num_key_value_heads"]) * head_dim
    inter = int(config["intermediate_size"])
    std = float(config["initializer_range"])

    def normal(*shape: int) -> Any:
        return (rng.standard_normal(shape, dtype=np.float32) * std).astype(np.float32)

    def ones(n: int) -> Any:
        return np.ones((n,), dtype=np.float32)

    tensors: dict[str, Any] = {"model.embed_tokens.weight": normal(int(config["vocab_size"]), hidden)}
    for i in range(int(config["num_hidden_layers"])):
        p = f"model.layers.{i}."
        tensors[p + "input_layernorm.weight"] = ones(hidden)
        tensors[p + "self_attn.q_proj.weight"] = normal(q_dim, hidden)
        tensors[p + "self_attn.k_proj.weight"] = normal(kv_dim, hidden)
        tensors[p + "self_attn.v_proj.weight"] = normal(kv_dim, hidden)
        tensors[p + "self_attn.o_proj.weight"] = normal(hidden, q_dim)
        tensors[p + "self_attn.q_norm.weight"] = ones(head_dim)
        tensors[p + "self_attn.k_norm.weight"] = ones(head_dim)
        tensors[p + "post_attention_layernorm.weight"] = ones(hidden)
        tensors[p + "mlp.gate_proj.weight"] = normal(inter, hidden)
        tensors[p + "mlp.up_proj.weight"] = normal(inter, hidden)
        tensors[p + "mlp.down_proj.weight"] = normal(hidden, inter)
    tensors["model.norm.weight"] = ones(hidden)
    return tensors


def _bias_towards_eos(tensors: dict[str, Any], bias: float) -> None:
    """Make replies end: every embedding's first dimension becomes 1 (<|im_end|>'s 1 + ``bias``).

    The residual stream then carries a large positive first dimension to the final norm, and since the
    LM head is the tied embedding, <|im_end|>'s logit leads every other token's by about 11 x ``bias``.
    Measured on the default shape (hidden 128) with 0.8: P(<|im_end|>) about 0.47 a token at temperature
    0.6 and 0.008 at 1.0 — replies of ~1 and ~130 tokens instead of running to ``max_tokens``, so real
    clients (Claude Code, Codex), which fail a reply cut at its limit, finish their turn.
    """
    embed = tensors["model.embed_tokens.weight"]
    embed[:, 0] = 1.0
    embed[IM_END_ID, 0] = 1.0 + bias


GENERATION_CONFIG: dict[str, Any] = {
    "bos_token_id": 151643,
    "eos_token_id": [151645, 151643],
    "pad_token_id": 151643,
    "do_sample": True,
    "temperature": 0.6,
    # Qwen ships top_k 20 / top_p 0.95: top-k over a 152k vocabulary costs more than this model
    # itself on a CPU, so the tiny model turns both off.
    "top_k": 0,
    "top_p": 1.0,
}


def _check_shape(layers: int, hidden: int, seed: int) -> None:
    from llmdeck.errors import UsageError

    if seed < 0:  # numpy's generator takes none: it was an internal error after the folder was made
        raise UsageError(f"--seed must be 0 or more, got {seed}.", hint="Use e.g. --seed 0 (the default).")

    if layers < 1 or layers > 64:
        raise UsageError(f"--layers must be between 1 and 64, got {layers}.")
    if hidden < HEAD_DIM or hidden % HEAD_DIM or hidden > 4096:
        raise UsageError(
            f"--hidden must be a multiple of {HEAD_DIM} between {HEAD_DIM} and 4096, got {hidden}.",
            hint="Use e.g. --hidden 128 (the default) or 256.",
        )


def _describe(
    dir: Path, config_dict: dict[str, Any], *, seed: int, n_params: int, checked: int, started: float
) -> TinyModelInfo:
    """The marker's record of what was made (config, files, time taken, versions)."""
    import transformers

    files = sorted(p.name for p in dir.iterdir() if p.is_file() and not p.name.startswith("."))
    info = TinyModelInfo(
        path=str(dir.resolve()),
        layers=config_dict["num_hidden_layers"],
        hidden_size=config_dict["hidden_size"],
        num_attention_heads=config_dict["num_attention_heads"],
        num_key_value_heads=config_dict["num_key_value_heads"],
        head_dim=HEAD_DIM,
        intermediate_size=config_dict["intermediate_size"],
        vocab_size=VOCAB_SIZE,
        max_position_embeddings=MAX_POSITION_EMBEDDINGS,
        dtype="float32",
        seed=seed,
        parameters=int(n_params),
        tokenizer_checked_strings=checked,
        files=files,
        seconds=round(time.monotonic() - started, 2),
        transformers_version=str(transformers.__version__),
        host={"python": platform.python_version(), "platform": platform.platform()},
    )
    return info


def make_tiny_model(
    dir: Path,
    *,
    force: bool = False,
    layers: int = 2,
    hidden: int = 128,
    seed: int = 0,
    eos_bias: float | None = None,
) -> TinyModelInfo:
    """Write a tiny random-weight Qwen3ForCausalLM with a real Qwen3 tokenizer into ``dir``.

    Raises :class:`AlreadyExistsError` if ``dir`` is not empty and ``force`` is false,
    :class:`MissingDependencyError` if the ``cpu`` extra is missing, and :class:`OperationError`
    if the built tokenizer does not encode exactly like tiktoken on the same ranks.
    """
    from llmdeck.model.tokenizer import _require_cpu_extra, verify_tokenizer, write_tokenizer

    dir = Path(dir).expanduser()
    _check_shape(layers, hidden, seed)
    _check_target(dir, force)
    _require_cpu_extra()

    import numpy as np
    import transformers
    from safetensors.numpy import save_file

    started = time.monotonic()
    try:  # /proc/x, a read-only mount, a full disk: one sentence, not an internal error
        dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelPathError(
            f"Cannot make the folder {dir}: {exc.strerror or exc}.",
            hint="Pick a path in a folder you can write to.",
        ) from exc
    clear_made_dir(dir, "tiny model", LEGACY_MARKERS)
    mark_made(dir, "tiny model")

    config_dict = _model_config(layers, hidden)
    tensors = _random_weights(config_dict, np.random.default_rng(seed))
    if eos_bias is not None:
        _bias_towards_eos(tensors, eos_bias)
    n_params = sum(int(t.size) for t in tensors.values())
    # Plain float32: CPUs without AVX512-BF16 run vLLM's CPU backend fastest in fp32.
    save_file(tensors, str(dir / "model.safetensors"), metadata={"format": "pt"})
    (dir / "generation_config.json").write_text(json.dumps(GENERATION_CONFIG, indent=2) + "\n", "utf-8")
    write_tokenizer(dir)
    checked = verify_tokenizer(dir)
    # config.json last: whoever waits for it finds a complete folder.
    config_dict["torch_dtype"] = "float32"
    config_dict["transformers_version"] = transformers.__version__
    atomic_write_json(dir / "config.json", config_dict)
    (dir / "config.json").chmod(0o644)

    info = _describe(dir, config_dict, seed=seed, n_params=n_params, checked=checked, started=started)
    info.eos_bias = eos_bias
    atomic_write_json(dir / MARKER_FILE, info)
    (dir / MARKER_FILE).chmod(0o644)
    seal_made(dir)
    return info
