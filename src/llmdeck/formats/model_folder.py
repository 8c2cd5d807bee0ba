"""A Hugging Face model folder's JSON files, read in one place: ``config.json`` (and a lone
``NAME.config.json``), ModelOpt's ``hf_quant_config.json``, the safetensors index
(``*.safetensors.index.json``) and ``tokenizer_config.json``'s chat template.

Every way ``config.json`` can fail to be read — missing, a pipe or a device, a symbolic link that
loops or leads nowhere, too big, not UTF-8, not JSON, nested or sized past any model config, not an
object — is one :class:`ConfigError` (or :class:`ModelPathError` when it is missing) naming the file,
exit 2. What the fields mean (sizes,
defaults, architectures) is for the reader's caller: the planner, ``up``'s model check, the catalog.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

from llmdeck.errors import ConfigError, ModelPathError
from llmdeck.formats.json_bounds import json_depth, value_depth
from llmdeck.util.jsonsafe import TooDeepError
from llmdeck.util.jsonsafe import loads as _json_loads

# The largest real config.json is well under 1 MB (quantized models listing ignored modules: ~100 KB).
# A bigger one is no model config, and reading it costs without bound: 45 MB of nested lists made
# `plan` run 95 s and hold 7 GB (issue 38); 4 MiB reads in a fraction of a second.
MAX_CONFIG_BYTES = 4 << 20
MAX_CONFIG_VALUES = 200_000  # every value a transformers config copy and dump walks (bl4: 800k, 19 s)
MAX_CONFIG_DEPTH = 64  # real configs nest 3-4 levels; json.loads recurses once per level
MAX_INDEX_BYTES = 256 << 20  # a safetensors index or tokenizer config: MBs for the largest models
MAX_TOKENIZER_LENGTH = 1 << 40  # beyond any context; transformers' "no limit" is 1e30
MAX_CHECKPOINT_BYTES = 1 << 50  # 1 PiB: the largest checkpoints are a few TB; beyond, an index is corrupt
REFETCH = "Check the file, or run `llmdeck fetch REPO_ID --config-only` for the model's real config.json."


def broken_link_error(path: Path) -> ConfigError | None:
    """A ConfigError for ``path`` when it is a symbolic link that leads nowhere (a loop, or to a
    missing file: a cut download, a moved or cleaned HF cache); None otherwise."""
    if not path.is_symlink() or path.exists():
        return None
    try:
        target = os.readlink(path)
        os.stat(path)
    except OSError as exc:
        loops = exc.errno == errno.ELOOP
    else:  # it resolved after all (changed between the two looks): nothing to report
        return None
    hint = (
        "Replace the link with the real file or folder (for a model, re-download it, or run "
        "`llmdeck fetch REPO_ID --config-only` for its config.json)."
    )
    if loops:
        return ConfigError(
            f"{path} is a symbolic link that loops (to {target}, and following the links leads back to "
            "one already followed), so it cannot be read.",
            hint=hint,
        )
    return ConfigError(
        f"{path} is a symbolic link to {target}, which does not exist (a broken link).", hint=hint
    )


def read_model_config(path: Path) -> dict[str, Any]:
    """Read and parse one config.json, turning every failure into a ConfigError (exit 2)."""
    from llmdeck.util.localfile import read_regular_text

    if (broken := broken_link_error(path)) is not None:
        raise broken
    try:
        text = read_regular_text(path, MAX_CONFIG_BYTES)  # a FIFO or device is refused, never waited on
    except FileNotFoundError as exc:
        raise ModelPathError(
            f"{path} does not exist.", hint="Point llmdeck at a model folder that holds config.json."
        ) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start}), so it is not a model config.",
            hint="Fetch config.json again (llmdeck fetch REPO_ID --config-only) or fix the file.",
        ) from exc
    except OSError as exc:
        raise ConfigError(
            f"Cannot read {path}: {exc.strerror or exc}.", hint="Check the file and its permissions."
        ) from exc
    return parse_model_config(text, str(path))


def parse_model_config(text: str, where: str) -> dict[str, Any]:
    """The JSON object of a config's text (``where`` names it in the messages), within the bounds."""
    too_deep = (
        f"{where} nests its JSON {{}} levels deep (a model config nests a handful; llmdeck reads at most "
        f"{MAX_CONFIG_DEPTH}), so it is not a model config."
    )
    if text.startswith("\ufeff"):  # json.loads (transformers', vLLM's) refuses it: "Unexpected UTF-8 BOM"
        raise ConfigError(
            f"{where} starts with a UTF-8 byte-order mark, which the JSON readers of transformers and vLLM "
            "refuse, so vLLM could not read it either.",
            hint="Save it without the mark (UTF-8, no BOM), or fetch config.json again.",
        )
    try:
        data = _json_loads(text)
    except TooDeepError as exc:
        raise ConfigError(too_deep.format(json_depth(text)), hint=REFETCH) from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{where} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}).",
            hint="The download was probably cut short; fetch config.json again.",
        ) from exc
    depth, count = value_depth(data, MAX_CONFIG_VALUES) if isinstance(data, dict | list) else (0, 0)
    if depth > MAX_CONFIG_DEPTH:
        raise ConfigError(too_deep.format(depth), hint=REFETCH)
    if count > MAX_CONFIG_VALUES:
        raise ConfigError(
            f"{where} holds more than {MAX_CONFIG_VALUES:,} JSON values (a model config holds hundreds, a "
            "quantized one's module lists a few thousand), so it is not a model config.",
            hint=REFETCH,
        )
    if not isinstance(data, dict):
        raise ConfigError(
            f"{where} is not a JSON object (it holds {_json_kind(data)}, not an object of settings), "
            "so it is not a model config.",
            hint=REFETCH,
        )
    return data


def _json_kind(data: object) -> str:
    """What a JSON document holds, in JSON's words."""
    if data is None:
        return "null"
    if isinstance(data, bool):
        return "true" if data else "false"
    if isinstance(data, list):
        return "an array"
    return "a string" if isinstance(data, str) else "a number"


def read_hf_quant_config(model_dir: Path) -> dict[str, Any] | None:
    """ModelOpt's ``hf_quant_config.json`` (ModelOpt <= 0.29 keeps the quantization only there).

    vLLM reads it when config.json has no ``quantization_config``
    (vllm 0.22.0 vllm/transformers_utils/config.py:781-792).
    """
    path = model_dir / "hf_quant_config.json"
    if not path.is_file():
        return None
    data = read_model_config(path)
    inner = data.get("quantization", data)
    if not isinstance(inner, dict):
        raise ConfigError(
            f"{path}: field 'quantization' is not an object.", hint="Fetch hf_quant_config.json again."
        )
    return {"quant_method": "modelopt", **data}


def read_index_total_size(model_dir: Path) -> int | None:
    """``metadata.total_size`` of ``model.safetensors.index.json``, or the size of a lone safetensors file."""
    from llmdeck.util.localfile import read_regular_text

    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        try:
            data = _json_loads(read_regular_text(index, MAX_INDEX_BYTES))
            size = data.get("metadata", {}).get("total_size")
            if isinstance(size, int | float) and 0 < size <= MAX_CHECKPOINT_BYTES:  # 1e308: no size from it
                return int(size)
        except (OSError, ValueError, AttributeError):  # not UTF-8, not JSON: no size from it
            return None
    single = model_dir / "model.safetensors"
    if single.is_file() and not single.is_symlink():
        return single.stat().st_size
    if single.is_symlink() and single.exists():
        return single.resolve().stat().st_size
    return None


def read_index_weight_map(index: Path) -> dict[str, Any]:
    """The ``weight_map`` of a safetensors index (tensor -> shard file).

    ``OSError`` / ``ValueError`` (not UTF-8, not JSON) / ``KeyError`` / ``TypeError`` when it is not
    one: the caller, verifying a download, records why and goes on."""
    from llmdeck.util.localfile import read_regular_text

    data = _json_loads(read_regular_text(index, MAX_INDEX_BYTES))
    weight_map = data["weight_map"]
    if not isinstance(weight_map, dict):
        raise TypeError("weight_map is not an object")
    return weight_map


def read_tokenizer_max_length(model_dir: Path) -> int | None:
    """``model_max_length`` of the folder's ``tokenizer_config.json``, which vLLM takes the smaller of with
    the config's length (vllm 0.22.0 config/model.py:2144-2149; 0.34.0 :2614-2619). None when the file is
    missing or unreadable, or the value is no length (transformers writes 1e30 for "no limit")."""
    from llmdeck.util.localfile import read_regular_text

    path = model_dir / "tokenizer_config.json"
    if not path.is_file():
        return None
    try:
        value = _json_loads(read_regular_text(path, MAX_INDEX_BYTES)).get("model_max_length")
    except (OSError, ValueError, AttributeError):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if 1 <= value <= MAX_TOKENIZER_LENGTH else None


def has_chat_template(model_dir: Path) -> bool:
    """A chat_template.jinja/.json file, or a ``chat_template`` in tokenizer_config.json."""
    from llmdeck.util.localfile import read_regular_text

    if (model_dir / "chat_template.jinja").is_file() or (model_dir / "chat_template.json").is_file():
        return True
    tok_config = model_dir / "tokenizer_config.json"
    if not tok_config.is_file():
        return False
    try:
        return "chat_template" in _json_loads(read_regular_text(tok_config, MAX_INDEX_BYTES))
    except (OSError, ValueError, TypeError):
        return False


def has_vision_tower(model: str) -> bool:
    """A model whose config.json has a ``vision_config`` (Qwen-VL, Gemma 3, Llama 4, ...): a local
    folder, or a hub name's newest snapshot in the HF cache (where vLLM reads it from); False where the
    config is not there or cannot be read (not claimed where not known)."""
    from llmdeck.errors import LlmdeckError
    from llmdeck.util.hfpaths import find_in_hf_cache

    folder = Path(model).expanduser()
    if not folder.is_dir() and model.count("/") == 1:  # "org/name": the hub's, if it was fetched
        folder = find_in_hf_cache(model) or folder
    config = folder / "config.json"
    try:
        return config.is_file() and isinstance(read_model_config(config).get("vision_config"), dict)
    except (LlmdeckError, OSError):
        return False
