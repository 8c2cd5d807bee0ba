"""A random-weight GGUF of a hybrid Qwen3.5/3.6 MoE (Gated DeltaNet + attention) of any config's shape,
quantized the way Ollama users run it (Q4_K, the output layer Q6_K), for llama.cpp's server on the H200.

Two steps, because a 35B model cannot be converted here or carried (64 MiB a device call):

  skeleton (here): llama.cpp's own converter (``convert_hf_to_gguf``'s Qwen3_5MoeTextModel, from the
    llama.cpp that llama-cpp-python 0.3.36 vendors) runs over the config with tensors that have a shape
    and no data (its ``--remote`` path, fed from transformers' own module tree on the meta device), so
    every metadata key, tensor name, shape and transform is the converter's. Its float16 tensors become
    Q4_K (Q6_K for ``output.weight``; Q8_0 or float16 where a row does not divide into 256); what it
    keeps in float32 (norms, A, dt bias, conv, router) stays float32. Writes OUT.skel (header, metadata,
    tensor table) and OUT.plan.json (each tensor's type and bytes, in file order).
  fill (the device, numpy only): appends each tensor's bytes: random quants under a small finite scale,
    norms at 1, A at -1; the file then loads in llama.cpp like a converted and quantized checkpoint.

usage:
  python hybrid_gguf.py skeleton MODEL_DIR OUT_PREFIX LLAMA_CPP_SOURCE   (MODEL_DIR: config.json + tokenizer)
  python hybrid_gguf.py fill OUT_PREFIX OUT.gguf
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

Q4_K, Q6_K, Q8_0, F16, F32 = 12, 14, 8, 1, 0  # ggml type ids
BLOCK = {Q4_K: (256, 144), Q6_K: (256, 210), Q8_0: (32, 34), F16: (1, 2), F32: (1, 4)}
ALIGN = 32


def _hf_tensors(config: dict[str, Any]) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Checkpoint name -> (safetensors dtype, shape) of the text model, from transformers' module tree."""
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    cfg = AutoConfig.for_model(**config)
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(cfg)
    return {k: ("BF16", tuple(v.shape)) for k, v in model.state_dict().items() if ".visual." not in f".{k}"}


def _at(prefix: Path, suffix: str) -> Path:
    return prefix.parent / (prefix.name + suffix)  # not with_suffix: "qwen3.6-..." has a dot


def _target_type(name: str, shape: list[int], converter_type: int) -> int:
    if converter_type != F16 or len(shape) < 2:
        return converter_type
    if shape[0] % 256 == 0:
        return Q6_K if name == "output.weight" else Q4_K
    return Q8_0 if shape[0] % 32 == 0 else F16


def skeleton(model_dir: Path, prefix: Path, llama_cpp: Path) -> None:
    sys.path[:0] = [str(llama_cpp / "gguf-py"), str(llama_cpp)]
    import gguf
    import torch
    from conversion import ModelBase, ModelType, get_model_architecture, get_model_class

    hparams = ModelBase.load_hparams(model_dir, False)
    fake = {
        name: gguf.utility.RemoteTensor(dtype, shape, 0, 0, "no-data")
        for name, (dtype, shape) in _hf_tensors(json.loads((model_dir / "config.json").read_text())).items()
    }
    gguf.utility.SafetensorRemote.get_list_tensors_hf_model = staticmethod(lambda _id: fake)
    cls = get_model_class(get_model_architecture(hparams, ModelType.TEXT))
    cls.no_mtp = True  # llama-server runs no MTP draft unless told; vLLM is not given one either
    with torch.inference_mode():
        model = cls(
            model_dir,
            gguf.LlamaFileType.MOSTLY_F16,
            _at(prefix, ".skel"),
            remote_hf_model_id="random/weights",
        )
        model.prepare_tensors()
        model.prepare_metadata(vocab_only=False)
    writer = model.gguf_writer
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    plan = []
    for name, ti in writer.tensors[0].items():
        shape = [int(x) for x in reversed(ti.shape)]  # ggml order: row length first
        kind = _target_type(name, shape, int(ti.dtype))
        per, size = BLOCK[kind]
        n = 1
        for x in shape:
            n *= x
        nbytes = n // per * size
        writer.tensors[0][name] = type(ti)(
            shape=ti.shape, dtype=gguf.GGMLQuantizationType(kind), nbytes=nbytes
        )
        plan.append({"name": name, "type": kind, "shape": shape, "nbytes": nbytes})
    writer.write_header_to_file(path=_at(prefix, ".skel"))
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    _at(prefix, ".plan.json").write_text(json.dumps(plan, indent=0))
    kinds: dict[int, int] = {}
    for t in plan:
        kinds[t["type"]] = kinds.get(t["type"], 0) + t["nbytes"]
    print(f"{len(plan)} tensors; bytes by ggml type: {kinds}; total {sum(kinds.values()) / 2**30:.2f} GiB")


def _pool(kind: int, name: str, nbytes: int, rng: Any) -> Any:
    """A buffer of whole blocks of ``kind`` (at most 64 MiB) to repeat over a tensor's bytes."""
    import numpy as np

    _per, size = BLOCK[kind]
    blocks = max(1, min(nbytes, 64 << 20) // size)
    if kind == F32:
        value = 1.0 if "norm" in name else (-1.0 if name.endswith("ssm_a") else None)
        data = (
            np.full(blocks, value, np.float32)
            if value is not None
            else (rng.standard_normal(blocks, dtype=np.float32) * 0.02)
        )
        return data.view(np.uint8)
    if kind == F16:
        return (rng.standard_normal(blocks, dtype=np.float32) * 0.02).astype(np.float16).view(np.uint8)
    raw = rng.integers(0, 256, size=(blocks, size), dtype=np.uint8)
    scale = {Q4_K: (0, 6e-5), Q6_K: (208, 1e-5), Q8_0: (0, 2e-4)}[kind]
    raw[:, scale[0] : scale[0] + 2] = np.frombuffer(np.float16(scale[1]).tobytes(), np.uint8)
    if kind == Q4_K:
        raw[:, 2:4] = 0  # dmin
    return raw.reshape(-1)


def fill(prefix: Path, out: Path) -> None:
    import shutil

    import numpy as np

    rng = np.random.default_rng(0)
    plan = json.loads(_at(prefix, ".plan.json").read_text())
    tmp = _at(out, ".partial")
    shutil.copyfile(_at(prefix, ".skel"), tmp)
    with tmp.open("ab") as f:
        f.write(b"\0" * (-f.tell() % ALIGN))
        for t in plan:
            pool = _pool(t["type"], t["name"], t["nbytes"], rng)
            left = t["nbytes"]
            while left:
                piece = pool[: min(left, pool.size)]
                f.write(piece.tobytes())
                left -= piece.size
            f.write(b"\0" * (-t["nbytes"] % ALIGN))
    tmp.rename(out)
    print(f"{out}: {out.stat().st_size / 2**30:.2f} GiB, {len(plan)} tensors")


if __name__ == "__main__":
    if sys.argv[1:2] == ["skeleton"] and len(sys.argv) == 5:
        skeleton(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
    elif sys.argv[1:2] == ["fill"] and len(sys.argv) == 4:
        fill(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        sys.exit(__doc__)
