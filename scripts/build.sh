#!/usr/bin/env bash
# Configures and builds one flavour of dgemma with ccache.
#   scripts/build.sh release   -> build/release (Release, tests and benchmarks)
#   scripts/build.sh asan      -> build/asan    (Debug + AddressSanitizer + UBSan, tests only;
#                                                 CUDA backend on the emulated device)
#   scripts/build.sh fuzz      -> build/fuzz    (clang + libFuzzer targets)
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=${1:-release}
jobs=${DGEMMA_JOBS:-$(nproc)}
# Paths under the checkout are hashed relative to it, so a clone in another
# folder (CI) hits the cache of an earlier build.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
case "$flavour" in
  release) args=(-DCMAKE_BUILD_TYPE=Release) ;;
  # The release flavour compiles the CUDA kernels with nvcc; this one runs the
  # CUDA backend on the emulated device (kernels on the CPU, under the
  # sanitizers), so that its tests run without a GPU.
  # The OpenCL backend runs on PoCL here too; the allocations PoCL and its
  # LLVM keep until exit are suppressed for LeakSanitizer by
  # scripts/lsan-suppressions.txt (docs/opencl.md §5).
  asan) args=(-DCMAKE_BUILD_TYPE=Debug -DDGEMMA_SANITIZE=ON -DDGEMMA_BENCH=OFF -DDGEMMA_CUDA=EMULATE -DDGEMMA_OPENCL=AUTO
              -DCMAKE_CXX_FLAGS=-O1) ;;
  fuzz) args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DDGEMMA_FUZZ=ON -DDGEMMA_TESTS=OFF -DDGEMMA_BENCH=OFF
              -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++) ;;
  *) echo "unknown flavour '$flavour' (release, asan, fuzz)" >&2; exit 2 ;;
esac
cmake -S . -B "build/$flavour" -G Ninja "${args[@]}" >/dev/null
if [ "$flavour" = fuzz ]; then
  cmake --build "build/$flavour" -j "$jobs" --target fuzz_all   # only the fuzz targets
else
  cmake --build "build/$flavour" -j "$jobs"
fi
