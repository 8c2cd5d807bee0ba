"""Does vLLM's ``/tokenize`` count a /v1/completions string prompt as the completion counts it?
(gateway/roomcap.py counts such a prompt so, on a backend that counts the cap against the context.)

Against the real CPU vLLM 0.32 (the tiny Qwen3 with the real tokenizer, ``--max-model-len 2048``): for
each prompt and ``add_special_tokens`` (unset, true, false), ``POST /tokenize`` with the fields roomcap
sends beside ``usage.prompt_tokens`` of ``POST /v1/completions`` with ``max_tokens: 1``.

    PYTHONPATH=src python evidence/gateway/count_completions.py --backend http://127.0.0.1:PORT \
        --out evidence/gateway/results/count_completions_vllm032.txt
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import httpx

from llmdeck.gateway.roomcap import count_request

PROMPTS = [
    "Say hi.",
    "def f(x):\n    return x * 2\n",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",  # special tokens written as text
    "héllo wörld 日本語 🎉 " * 50,
    " leading space",
    "word " * 1500,
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    with httpx.Client(base_url=args.backend, timeout=120) as c:
        model = c.get("/v1/models").json()["data"][0]["id"]
        lines = [f"vLLM {c.get('/version').json()['version']}, model {model}"]
        same = True
        for prompt in PROMPTS:
            for special in (None, True, False):
                body: dict[str, Any] = {"model": model, "prompt": prompt, "max_tokens": 1}
                if special is not None:
                    body["add_special_tokens"] = special
                asked = count_request("completions", body)
                assert asked is not None
                counted = c.post(asked[0], json=asked[1]).json()["count"]
                used = c.post("/v1/completions", json=body).json()["usage"]["prompt_tokens"]
                same &= counted == used
                lines.append(
                    f"{prompt[:24]!r:30} add_special_tokens={special!s:5} tokenize={counted:5} "
                    f"usage.prompt_tokens={used:5} {'same' if counted == used else 'DIFFERENT'}"
                )
        lines.append("all the same" if same else "SOME DIFFER")
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
