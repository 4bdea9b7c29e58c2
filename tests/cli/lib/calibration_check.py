"""Independent check of `dgemma quantize --calibrate-ids` (docs/formats.md §3.5).

Shares no code with the calibration: it reads the samples file itself, draws
the decoder canvases from the documented formula, runs `dgemma forward
--expert-inputs` on each sample (encoder pass, then one decoder pass over the
canvas), takes the absolute maxima of the tapped expert inputs over the tokens
routed to each expert, and compares every exported input_scale with
amax / (6 * 448) computed in float32, bit for bit.

usage: calibration_check.py DGEMMA MODEL SAMPLES SEQ_LEN COUNT PASSES SCALES OUT TMP
  PASSES: encoder | decoder | both    SCALES: layer | expert
Prints one line per check; exits 1 on any failure.
"""
import hashlib
import json
import math
import os
import struct
import subprocess
import sys

MASK64 = (1 << 64) - 1


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b0, b1 = e["data_offsets"]
        out[name] = (e["dtype"], e["shape"], data[b0:b1])
    return out


def floats(entry):
    dtype, shape, raw = entry
    assert dtype == "F32", dtype
    return list(struct.unpack("<%df" % (len(raw) // 4), raw)), shape


def ints(entry):
    dtype, shape, raw = entry
    fmt = {"I64": "q", "I32": "i"}[dtype]
    size = struct.calcsize(fmt)
    return list(struct.unpack("<%d%s" % (len(raw) // size, fmt), raw)), shape


def write_ids(path, tensors):
    """Writes I64 tensors {name: (shape, values)} as a safetensors file."""
    header, blobs, at = {}, [], 0
    for name, (shape, values) in tensors.items():
        raw = struct.pack("<%dq" % len(values), *values)
        header[name] = {"dtype": "I64", "shape": shape, "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def canvas(seed, sample, length, vocab):
    ids = []
    for k in range(length):
        z = (seed * 0x9E3779B97F4A7C15 + sample * length + k) & MASK64
        z = (z + 0x9E3779B97F4A7C15) & MASK64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        z ^= z >> 31
        ids.append(z % vocab)
    return ids


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def main():
    dgemma, model, samples_file, seq_len, count, passes, scales, out, tmp = sys.argv[1:10]
    seq_len, count = int(seq_len), int(count)
    cfg = json.load(open(os.path.join(model, "config.json")))
    text = cfg.get("text_config", cfg)
    L, E, K = text["num_hidden_layers"], text["num_experts"], text["top_k_experts"]
    vocab, C = text["vocab_size"], cfg.get("canvas_length", text.get("canvas_length", 256))

    samples = []
    for line in open(samples_file):
        ids = [int(t) for t in line.replace(",", " ").replace("[", " ").replace("]", " ").split()]
        if ids and len(samples) < count:
            samples.append(ids[:seq_len])

    gu = [[0.0] * E for _ in range(L)]
    dn = [[0.0] * E for _ in range(L)]
    for s, ids in enumerate(samples):
        inputs = ["--inputs", os.path.join(tmp, "enc%d.st" % s)]
        write_ids(inputs[1], {"input_ids": ([1, len(ids)], ids)})
        if passes != "encoder":
            inputs += ["--inputs", os.path.join(tmp, "dec%d.st" % s)]
            write_ids(inputs[3], {"decoder_input_ids": ([1, C], canvas(0, s, C, vocab))})
        taps_file = os.path.join(tmp, "taps%d.st" % s)
        subprocess.run([dgemma, "forward", "-m", model, *inputs, "--out", taps_file, "--expert-inputs"],
                       check=True, stderr=subprocess.DEVNULL)
        taps = read_safetensors(taps_file)
        for p in ("encoder", "decoder"):
            if passes not in (p, "both"):
                continue
            for layer in range(L):
                idx, ishape = ints(taps["%s.router.%d.top_k_index" % (p, layer)])
                x, xshape = floats(taps["%s.experts.%d.input" % (p, layer)])
                a, ashape = floats(taps["%s.experts.%d.down_input" % (p, layer)])
                T, H, I = ishape[0], xshape[-1], ashape[-1]
                assert ishape == [T, K] and xshape == [1, T, H] and ashape == [1, T, K, I], (ishape, xshape, ashape)
                for t in range(T):
                    row = max(abs(v) for v in x[t * H:(t + 1) * H])
                    for j in range(K):
                        e = idx[t * K + j]
                        gu[layer][e] = max(gu[layer][e], row)
                        d = max(abs(v) for v in a[(t * K + j) * I:(t * K + j + 1) * I])
                        dn[layer][e] = max(dn[layer][e], d)

    weights = read_safetensors(os.path.join(out, "model.safetensors"))
    failures = 0
    checked = 0
    for layer in range(L):
        for name, amax in (("gate_up", gu[layer]), ("down", dn[layer])):
            layer_max = max(amax)
            for e in range(E):
                want_amax = amax[e] if scales == "expert" and amax[e] > 0 else layer_max
                want = f32(f32(want_amax) / 2688.0)
                mods = ("gate_proj", "up_proj") if name == "gate_up" else ("down_proj",)
                for m in mods:
                    key = "model.decoder.layers.%d.experts.%d.%s.input_scale" % (layer, e, m)
                    if key not in weights:
                        print("FAIL %s is missing" % key)
                        failures += 1
                        continue
                    got = floats(weights[key])[0][0]
                    checked += 1
                    if not (got == want and math.isfinite(got) and got > 0):
                        print("FAIL %s = %r, expected %r (amax %r)" % (key, got, want, want_amax))
                        failures += 1
    reached = sum(1 for layer in range(L) for e in range(E) if gu[layer][e] > 0)
    print("checked %d input_scale values (%d of %d layer experts reached)" % (checked, reached, L * E))

    # The calibration set's record: SHA-256 of (length, ids...) as little-endian int32.
    h = hashlib.sha256()
    for ids in samples:
        h.update(struct.pack("<i", len(ids)))
        h.update(struct.pack("<%di" % len(ids), *ids))
    hq = json.load(open(os.path.join(out, "hf_quant_config.json")))
    rec = hq["producer"].get("calibration", {})
    want_rec = {"sha256": h.hexdigest(), "samples": len(samples), "max_seq_len": max(len(i) for i in samples),
                "tokens": sum(len(i) for i in samples)}
    for k, v in want_rec.items():
        if rec.get(k) != v:
            print("FAIL producer.calibration.%s = %r, expected %r" % (k, rec.get(k), v))
            failures += 1
    sys.exit(1 if failures else 0)


main()
