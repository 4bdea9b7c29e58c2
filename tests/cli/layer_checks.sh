#!/usr/bin/env bash
# Test of scripts/check-layers.py, the CI check of docs/architecture.md §1
# (includes) and §2.1 (namespaces): it must pass a tree that keeps the rules
# and name the file, line and rule of each break in one that does not. Runs on
# a scratch git repository holding the script, the real layer tables and a
# few source files.
# usage: bash layer_checks.sh <dgemma-binary> <source-dir>   (the binary is unused)
set -euo pipefail
SRC=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$WORK/scripts" "$WORK/docs" "$WORK/src/core" "$WORK/src/model" "$WORK/src/backend/cpu"
cp "$SRC/scripts/check-layers.py" "$SRC/scripts/source_tree.py" "$WORK/scripts/"
cp "$SRC/docs/architecture.md" "$WORK/docs/"
cd "$WORK"
git init -q .
cat > src/core/thing.h <<'CC'
#pragma once
namespace dgemma {
struct Thing {};  // a "{" in a comment and a '}' as a character do not count
}
CC
cat > src/model/user.cc <<'CC'
#include "core/thing.h"
namespace dgemma {
namespace {
const char* brace = "}";
}  // namespace
void use(Thing) {}
}  // namespace dgemma
CC
cat > src/backend/cpu/kernel.cc <<'CC'
#include "core/thing.h"
namespace dgemma {
class DiffusionGemma;
}
namespace dgemma::cpu {
namespace avx512 {
void k() {}
}  // namespace avx512
}  // namespace dgemma::cpu
CC

python3 scripts/check-layers.py > out.txt || { cat out.txt; fail "a tree that keeps the rules was refused"; }
grep -q "every namespace is its layer's" out.txt || fail "no summary line: $(cat out.txt)"

expect_problem() {  # <description> <expected text>
  if python3 scripts/check-layers.py > out.txt; then fail "$1 passed"; fi
  grep -qF "$2" out.txt || fail "$1: want '$2' in: $(cat out.txt)"
}

# An include that runs upward.
echo '#include "model/user.h"' >> src/core/thing.h
touch src/model/user.h
expect_problem "core including model" 'src/core/thing.h:5: layer core includes "model/user.h" of layer model'
sed -i '$d' src/core/thing.h

# A namespace of another folder, and one nested under bare dgemma.
printf 'namespace dgemma::cpu {\nvoid f();\n}  // namespace dgemma::cpu\n' > src/model/wrong.cc
expect_problem "model opening dgemma::cpu" 'src/model/wrong.cc:1: layer model opens namespace dgemma::cpu'
printf 'namespace dgemma {\nnamespace detail {\nvoid f();\n}  // namespace detail\n}  // namespace dgemma\n' \
  > src/model/wrong.cc
expect_problem "a namespace nested in bare dgemma" 'src/model/wrong.cc:2: layer model opens namespace dgemma::detail'
rm src/model/wrong.cc

# A folder of no layer.
mkdir -p src/stray && echo 'namespace dgemma {}' > src/stray/x.cc
expect_problem "a folder of no layer" 'src/stray/x.cc: its folder src/stray belongs to no layer'
rm -r src/stray

python3 scripts/check-layers.py > out.txt || { cat out.txt; fail "the repaired tree was refused"; }
echo "layer checks: ok"
