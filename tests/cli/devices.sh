#!/usr/bin/env bash
# CLI test of `dgemma devices` and of --backend opencl:P.D (docs/opencl.md §2):
# the JSON list is well formed and each device's --backend string selects it;
# the CUDA devices (where the build has CUDA) with their properties;
# a device that does not exist is an error naming the ones that do.
# usage: bash devices.sh <dgemma-binary> <source-dir>
set -euo pipefail
BIN=$1
SRC=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$BIN" devices > "$WORK/text" || fail "devices exited $?"
"$BIN" devices --json > "$WORK/json" || fail "devices --json exited $?"
python3 - "$WORK/json" "$WORK/text" > "$WORK/specs" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
ocl = d["opencl"]
cu = d["cuda"]
assert isinstance(cu["built"], bool), cu
if cu["built"]:
    # Each CUDA device with its --backend string, name, memory and compute
    # capability (the first 16 of them), in the text as in the JSON.
    assert "CUDA devices: %d\n" % cu["count"] in text, text
    assert len(cu["devices"]) == min(cu["count"], 16), cu
    for k, g in enumerate(cu["devices"]):
        assert g["backend"] == "cuda:%d" % k, g
        if g["name"]:
            assert g["memory_bytes"] > 0 and g["multiprocessors"] > 0, g
            assert re.fullmatch(r"[0-9]+\.[0-9]+", g["compute_capability"]), g
            assert "  %s  %s\n" % (g["backend"], g["name"]) in text, (g, text)
            assert "    compute capability  %s\n" % g["compute_capability"] in text, (g, text)
else:
    assert "this build has no CUDA backend" in text, text
if not ocl["built"]:
    assert "no OpenCL backend" in text, text
    sys.exit(0)
devs = ocl["devices"]
assert text.startswith("OpenCL devices: %d\n" % len(devs)), text
for v in devs:
    assert v["backend"] == "opencl:%d.%d" % (v["platform"], v["device"]), v
    assert v["global_memory_bytes"] > 0 and v["compute_units"] > 0 and v["max_work_group_size"] > 0, v
    assert v["opencl_c_version"].startswith("OpenCL C "), v
    for k in ("fp16", "fp64", "subgroups", "int8_dot"):
        assert isinstance(v[k], bool), (k, v)
    assert "  %s  %s (%s)\n" % (v["backend"], v["name"], v["type"]) in text, (v, text)
    print(v["backend"])
if devs:
    gpus = [v["backend"] for v in devs if "gpu" in v["type"]]
    assert ocl["default"] == (gpus[0] if gpus else devs[0]["backend"]), ocl
else:
    assert ocl["error"], ocl
PY
if "$BIN" devices extra > /dev/null 2> "$WORK/err"; then fail "devices accepted an argument"; fi
grep -qF "unexpected argument 'extra'" "$WORK/err" || fail "devices extra: $(cat "$WORK/err")"

# A model command (the built-in default model) on a device that does not exist.
if [ -s "$WORK/specs" ]; then
  if "$BIN" run --backend opencl:0.99 -p hi > /dev/null 2> "$WORK/err"; then
    fail "--backend opencl:0.99 ran"
  fi
  grep -qF "backend 'opencl:0.99': OpenCL device 0.99 does not exist" "$WORK/err" || fail "opencl:0.99: $(cat "$WORK/err")"
  grep -qF "$(head -1 "$WORK/specs") (" "$WORK/err" || fail "opencl:0.99 does not name the devices: $(cat "$WORK/err")"
fi
echo "devices: ok"
