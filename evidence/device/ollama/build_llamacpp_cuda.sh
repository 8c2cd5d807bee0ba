#!/bin/bash
# llama.cpp's own server (`llama-server`, the engine Ollama wraps) with CUDA for the H200, built HERE on
# a machine without a GPU, then carried to the device (which has nvcc too, but every device second is
# lent time). The source is the llama.cpp that llama-cpp-python 0.3.36 vendors (the same llama.cpp as
# the CPU comparison of issue 36); the CUDA 13.0 toolchain comes from PyPI's nvidia-* wheels, matching
# the device's driver (580, CUDA 13.0) and its PyTorch (2.11+cu130), whose libcudart/libcublas it loads.
#
#   bash evidence/device/ollama/build_llamacpp_cuda.sh      # ~30 min on 2 cores -> .gpu/llamacpp-cuda/{a,b}
#
# Only Hopper's SASS is built (CMAKE_CUDA_ARCHITECTURES=90), FlashAttention kernels included (llama.cpp's
# default). Linking needs the driver library, which has no GPU-less package: a stub libcuda.so.1 that
# defines every entry point of cuda.h stands in for it (the device's real libcuda.so.1 is loaded there).
set -euo pipefail
ROOT=$(git rev-parse --show-toplevel)
W=${WORK:-/tmp/llamacpp-cuda-build}
T=${TOOLKIT:-$W/toolkit}; CU=$T/nvidia/cu13
PY=${PYTHON:-$ROOT/.venv/bin/python}
mkdir -p "$W"
if [ ! -x "$CU/bin/nvcc" ]; then
  "$PY" -m pip install -q --target "$T" nvidia-cuda-nvcc==13.0.88 nvidia-cuda-runtime==13.0.96 \
    nvidia-cublas==13.0.2.14 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-cccl==13.0.85
  (cd "$CU/lib" && ln -sf libcudart.so.13 libcudart.so && ln -sf libcublas.so.13 libcublas.so \
    && ln -sf libcublasLt.so.13 libcublasLt.so)
  ln -sfn lib "$CU/lib64"  # nvcc's own link step looks in lib64
fi
if [ ! -f "$CU/lib/stubs/libcuda.so" ]; then
  mkdir -p "$CU/lib/stubs"
  echo '#include <cuda.h>' > "$W/s.c"
  gcc -E -I"$CU/include" "$W/s.c" | tr '\n' ' ' | grep -oE "CUresult +[a-zA-Z_0-9]+ *\(" \
    | sed -E 's/CUresult +//; s/ *\(//' | sort -u | awk '{print "int " $1 "(void){return 999;}"}' > "$W/stub.c"
  gcc -shared -fPIC -o "$CU/lib/stubs/libcuda.so" -Wl,-soname,libcuda.so.1 "$W/stub.c"
fi
SRC=$W/llama_cpp_python-0.3.36/vendor/llama.cpp
if [ ! -d "$SRC" ]; then
  "$PY" -m pip download -q --no-deps --no-binary :all: -d "$W" llama-cpp-python==0.3.36
  tar -C "$W" -xzf "$W/llama_cpp_python-0.3.36.tar.gz"
fi
export PATH=$CU/bin:$PATH
cmake -S "$SRC" -B "$W/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_COMPILER="$CU/bin/nvcc" -DCUDAToolkit_ROOT="$CU" \
  -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_CUDA_NCCL=OFF \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=ON \
  -DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined > "$W/configure.log"
ninja -C "$W/build" -j"$(nproc)" llama-server llama-bench
OUTD=$ROOT/.gpu/llamacpp-cuda
rm -rf "$OUTD" "$W/pack" && mkdir -p "$OUTD" "$W/pack/bin" "$W/pack/lib"
cp "$W"/build/bin/llama-server "$W"/build/bin/llama-bench "$W/pack/bin/"
cp -P "$W"/build/bin/lib*.so* "$W/pack/lib/" 2>/dev/null || cp -P "$W"/build/*/lib*.so* "$W/pack/lib/"
strip --strip-unneeded "$W"/pack/bin/* "$W"/pack/lib/*.so* 2>/dev/null || true
tar -C "$W/pack" -czf "$OUTD/llamacpp-cuda.tar.gz" bin lib
(cd "$OUTD" && sha256sum llamacpp-cuda.tar.gz > llamacpp-cuda.sha256)
# ~47 MB: two parts, each small enough to ride in a 64 MiB carry beside the tracked files
(cd "$OUTD" && split -n 2 -d -a 1 llamacpp-cuda.tar.gz llamacpp-cuda.part && mkdir -p a b \
  && mv llamacpp-cuda.part0 llamacpp-cuda.sha256 a/ && mv llamacpp-cuda.part1 b/ && rm llamacpp-cuda.tar.gz)
du -sh "$OUTD"/a "$OUTD"/b
