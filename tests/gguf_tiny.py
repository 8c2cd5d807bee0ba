"""The tiny Qwen3 (``llmdeck model make-tiny``) as one GGUF file, for llama.cpp's server in CI.

Written with the ``gguf`` package's writer (the one llama.cpp's own ``convert_hf_to_gguf.py`` uses),
the way that converter writes a Qwen3: the same tensors under llama.cpp's names, kept in float32 (the
same weights vLLM serves, bit for bit), the GPT-2 style BPE vocabulary of ``tokenizer.json`` with
its merges, pre-tokenizer ``qwen2``, and the chat template of ``tokenizer_config.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _vocab(model_dir: Path, vocab_size: int) -> tuple[list[str], list[int], list[str], dict[str, Any]]:
    """(tokens, token types, merges, tokenizer_config) as convert_hf_to_gguf's _set_vocab_gpt2."""
    import gguf

    tok = json.loads((model_dir / "tokenizer.json").read_text("utf-8"))
    cfg = json.loads((model_dir / "tokenizer_config.json").read_text("utf-8"))
    by_id: dict[int, tuple[str, int]] = {
        i: (t, gguf.TokenType.NORMAL) for t, i in tok["model"]["vocab"].items()
    }
    for added in tok.get("added_tokens", []):
        kind = gguf.TokenType.CONTROL if added.get("special") else gguf.TokenType.USER_DEFINED
        by_id[int(added["id"])] = (added["content"], kind)
    tokens, types = [], []
    for i in range(vocab_size):
        text, kind = by_id.get(i, (f"[PAD{i}]", gguf.TokenType.UNUSED))
        tokens.append(text)
        types.append(int(kind))
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"].get("merges", [])]
    return tokens, types, merges, cfg


def write_tiny_gguf(model_dir: Path, out: Path) -> Path:
    """Convert ``model_dir`` (a make-tiny Qwen3) to ``out`` (GGUF, float32); returns ``out``."""
    import gguf
    import numpy as np
    from safetensors.numpy import load_file

    config = json.loads((model_dir / "config.json").read_text("utf-8"))
    weights = load_file(str(model_dir / "model.safetensors"))
    arch = gguf.MODEL_ARCH.QWEN3
    w = gguf.GGUFWriter(str(out), gguf.MODEL_ARCH_NAMES[arch])
    w.add_name("llmdeck-tiny-qwen3")
    w.add_context_length(int(config["max_position_embeddings"]))
    w.add_embedding_length(int(config["hidden_size"]))
    w.add_block_count(int(config["num_hidden_layers"]))
    w.add_feed_forward_length(int(config["intermediate_size"]))
    w.add_head_count(int(config["num_attention_heads"]))
    w.add_head_count_kv(int(config["num_key_value_heads"]))
    w.add_key_length(int(config["head_dim"]))
    w.add_value_length(int(config["head_dim"]))
    w.add_rope_freq_base(float(config["rope_theta"]))
    w.add_layer_norm_rms_eps(float(config["rms_norm_eps"]))
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    tokens, types, merges, tok_cfg = _vocab(model_dir, int(config["vocab_size"]))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(int(config["bos_token_id"]))
    w.add_eos_token_id(int(config["eos_token_id"]))
    w.add_pad_token_id(int(config.get("pad_token_id") or config["bos_token_id"]))
    w.add_add_bos_token(False)
    if tok_cfg.get("chat_template"):
        w.add_chat_template(tok_cfg["chat_template"])
    names = gguf.get_tensor_name_map(arch, int(config["num_hidden_layers"]))
    for hf_name, array in weights.items():
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if name is None:
            raise ValueError(f"no GGUF name for tensor {hf_name}")
        w.add_tensor(name, np.ascontiguousarray(array, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out
