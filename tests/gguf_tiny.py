"""The tiny Qwen3 (``llmdeck model make-tiny``) as one GGUF file, for llama.cpp's server in CI (and a
random-weight Qwen3 of any config's shape for the H200 script, evidence/device/ollama/compare_h200.sh).

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


def random_weights(config: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """A Qwen3 of ``config``'s shape with random float16 weights (HF names), for a shape that has no
    checkpoint here (the device script: gpu-lab's model folders hold a config and a tokenizer only)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    h, hd, inter = int(config["hidden_size"]), int(config["head_dim"]), int(config["intermediate_size"])
    q, kv = int(config["num_attention_heads"]) * hd, int(config["num_key_value_heads"]) * hd

    def normal(*shape: int) -> Any:
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float16)

    out: dict[str, Any] = {"model.embed_tokens.weight": normal(int(config["vocab_size"]), h)}
    out["model.norm.weight"] = np.ones(h, np.float32)
    for i in range(int(config["num_hidden_layers"])):
        p = f"model.layers.{i}."
        shapes = {"self_attn.q_proj": (q, h), "self_attn.k_proj": (kv, h), "self_attn.v_proj": (kv, h)}
        shapes |= {"self_attn.o_proj": (h, q), "mlp.gate_proj": (inter, h), "mlp.up_proj": (inter, h)}
        shapes |= {"mlp.down_proj": (h, inter)}
        out |= {f"{p}{k}.weight": normal(*v) for k, v in shapes.items()}
        out |= {f"{p}{k}.weight": np.ones(hd, np.float32) for k in ("self_attn.q_norm", "self_attn.k_norm")}
        out |= {
            f"{p}{k}.weight": np.ones(h, np.float32) for k in ("input_layernorm", "post_attention_layernorm")
        }
    if not config.get("tie_word_embeddings", False):
        out["lm_head.weight"] = normal(int(config["vocab_size"]), h)
    return out


def write_tiny_gguf(model_dir: Path, out: Path, *, random: bool = False) -> Path:
    """Convert ``model_dir`` (a make-tiny Qwen3) to ``out`` (GGUF: float32 as stored); ``random``:
    random float16 weights of its config's shape instead (no checkpoint needed). Returns ``out``."""
    import gguf
    import numpy as np

    config = json.loads((model_dir / "config.json").read_text("utf-8"))
    if random:
        weights = random_weights(config)
    else:
        from safetensors.numpy import load_file

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
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if random else gguf.LlamaFileType.ALL_F32)
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
        keep = np.float16 if random and array.ndim > 1 else np.float32
        w.add_tensor(name, np.ascontiguousarray(array, dtype=keep))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out


if __name__ == "__main__":  # the device script: python tests/gguf_tiny.py MODEL_DIR OUT.gguf [--random]
    import sys

    print(write_tiny_gguf(Path(sys.argv[1]), Path(sys.argv[2]), random="--random" in sys.argv[3:]))
