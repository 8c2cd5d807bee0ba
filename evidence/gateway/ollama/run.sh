#!/bin/bash
# Ollama's own Python client (ollama 0.6.3) through `llmdeck gateway` to two real CPU vLLM 0.32 servers of
# the tiny model: a chat server (hermes tools, qwen3 reasoning parser) and an embedding server
# (`--runner pooling --convert embed`). What a client written for Ollama sees with the gateway as its host.
#
#   bash evidence/gateway/ollama/run.sh > evidence/gateway/ollama/output.txt 2>&1
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd); cd "$ROOT"
W=$(mktemp -d /tmp/llmdeck-ollama.XXXXXX); export LLMDECK_STATE_DIR=$W/state
LD=(.venv/bin/llmdeck)
cleanup() { "${LD[@]}" gateway down >/dev/null 2>&1 || true; "${LD[@]}" down ev-chat >/dev/null 2>&1 || true
            "${LD[@]}" down ev-embed >/dev/null 2>&1 || true; rm -rf "$W"; }
trap cleanup EXIT
"${LD[@]}" up --model .cache/test-tiny --name ev-chat --port 18871 --engine cpu -- --enable-auto-tool-choice \
  --tool-call-parser hermes --reasoning-parser qwen3 --max-model-len 4096 2>&1 | tail -1
"${LD[@]}" up --model .cache/test-tiny --name ev-embed --port 18873 --engine cpu -- --runner pooling \
  --convert embed --max-model-len 512 2>&1 | tail -1
cat > "$W/gateway.yaml" <<YAML
routes:
  - model: qwen3:8b
    backends: [ev-chat]
    defaults: {chat_template_kwargs: {enable_thinking: false}}
  - model: nomic-embed-text
    backends: [ev-embed]
YAML
"${LD[@]}" gateway up --config "$W/gateway.yaml" --port 18872 2>&1 | tail -1
.venv/bin/python - <<'PY'
import importlib.metadata, ollama, httpx
print("ollama client", importlib.metadata.version("ollama"))
c = ollama.Client(host="http://127.0.0.1:18872", timeout=120)
print("version:", httpx.get("http://127.0.0.1:18872/api/version").json())
print("tags:", [(m.model, m.details.format) for m in c.list().models])
print("show qwen3:8b:", c.show("qwen3:8b").modelinfo, c.show("qwen3:8b").capabilities)
print("show nomic-embed-text:", c.show("nomic-embed-text").capabilities)
print("ps:", [(m.model, m.context_length) for m in c.ps().models])
ref = httpx.post("http://127.0.0.1:18872/v1/chat/completions", json={"model": "qwen3:8b", "max_tokens": 8,
      "temperature": 0, "messages": [{"role": "user", "content": "Say hi."}]}).json()
text = ref["choices"][0]["message"]["content"]
opts = {"temperature": 0, "num_predict": 8}
whole = c.chat(model="qwen3:8b", messages=[{"role": "user", "content": "Say hi."}], options=opts)
parts = list(c.chat(model="Qwen3:8B", messages=[{"role": "user", "content": "Say hi."}], options=opts, stream=True))
print("chat whole == OpenAI API:", whole.message.content == text, "| eval_count", whole.eval_count,
      "| done_reason", whole.done_reason)
print("chat streamed == OpenAI API:", "".join(p.message.content or "" for p in parts) == text, "|", len(parts),
      "lines, last:", {k: v for k, v in parts[-1].model_dump().items() if k.endswith(("count", "reason", "done"))})
think = list(c.chat(model="qwen3:8b", messages=[{"role": "user", "content": "Say hi."}], options=opts,
                    think=True, stream=True))
print("think=True: thinking chars", len("".join(p.message.thinking or "" for p in think)))
raw = c.generate(model="qwen3:8b", prompt="Once upon", raw=True, options={"temperature": 0, "num_predict": 4})
print("generate raw:", repr(raw.response), raw.eval_count)
e = c.embed(model="nomic-embed-text", input=["hello world", "second"])
print("embed:", len(e.embeddings), "x", len(e.embeddings[0]), "prompt_eval_count", e.prompt_eval_count)
print("embed 700 words, truncated:", len(c.embed(model="nomic-embed-text", input="hi " * 700).embeddings[0]))
for call in (lambda: c.embed(model="nomic-embed-text", input="hi " * 700, truncate=False),
             lambda: c.embed(model="qwen3:8b", input="x"), lambda: c.pull("llama3"),
             lambda: c.generate(model="qwen3:8b", keep_alive=0),
             lambda: c.chat(model="llama3", messages=[{"role": "user", "content": "x"}])):
    try:
        call()
    except ollama.ResponseError as exc:
        print("refused:", exc.status_code, exc.error)
print("legacy embeddings:", len(c.embeddings(model="nomic-embed-text", prompt="hello").embedding))
PY
echo "gateway access log:"; grep -o 'INFO llmdeck.gateway.access: .*' "$LLMDECK_STATE_DIR/logs/gateway.log" | sed 's/ ms=.*//' | cut -c29-
