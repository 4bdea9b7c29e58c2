#!/usr/bin/python3
"""Makes the small decode and resize reference files under decode/ (docs/image.md §10).

Run by hand with Debian 12's /usr/bin/python3 and its python3-pil 9.4.0 (the
Pillow the golden V processor ran with); CI never runs it, the tests read its
committed outputs. Inputs are tiny synthetic files written here (a minimal PNG
writer covers bit depths, colour types, Adam7 interlacing and metadata chunks
that Pillow cannot write); each expected image is what the reference loader
does to it:

    ImageOps.exif_transpose(Image.open(path)).convert("RGB")

stored as raw interleaved RGB bytes (<name>.rgb). decode/manifest.json lists
every case: file, expected height and width, or the error the decoder must
raise. resize/ holds Pillow BICUBIC resizes of one noise image.
"""
import io
import json
import os
import struct
import sys
import zlib

import PIL
from PIL import Image, ImageOps

assert PIL.__version__ == "9.4.0", f"needs Pillow 9.4.0 (Debian 12), found {PIL.__version__}"
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "decode")
RESIZE = os.path.join(HERE, "resize")
os.makedirs(OUT, exist_ok=True)
os.makedirs(RESIZE, exist_ok=True)

seed = 12345


def rand(n):
    """Deterministic pseudo-random bytes (an LCG; no numpy needed)."""
    global seed
    out = bytearray()
    for _ in range(n):
        seed = (seed * 1103515245 + 12345) & 0x7FFFFFFF
        out.append((seed >> 16) & 0xFF)
    return bytes(out)


# ---- a minimal PNG writer --------------------------------------------------
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def pack_row(samples, bit_depth):
    if bit_depth == 16:
        return b"".join(struct.pack(">H", s) for s in samples)
    if bit_depth == 8:
        return bytes(samples)
    out, acc, nbits = bytearray(), 0, 0
    for s in samples:
        acc = (acc << bit_depth) | s
        nbits += bit_depth
        if nbits == 8:
            out.append(acc)
            acc, nbits = 0, 0
    if nbits:
        out.append(acc << (8 - nbits))
    return bytes(out)


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def png(width, height, bit_depth, color_type, pixels, interlace=False, before=(), after=(), plte=None, trns=None):
    """pixels[y][x] is a tuple of samples."""
    raw = bytearray()
    if interlace:
        for x0, y0, dx, dy in ADAM7:
            xs = list(range(x0, width, dx))
            if not xs:
                continue
            for y in range(y0, height, dy):
                raw += b"\0" + pack_row([s for x in xs for s in pixels[y][x]], bit_depth)
    else:
        for y in range(height):
            raw += b"\0" + pack_row([s for x in range(width) for s in pixels[y][x]], bit_depth)
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 1 if interlace else 0)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
    for c in before:
        out += c
    if plte is not None:
        out += chunk(b"PLTE", plte)
    if trns is not None:
        out += chunk(b"tRNS", trns)
    out += chunk(b"IDAT", zlib.compress(bytes(raw), 9))
    for c in after:
        out += c
    return out + chunk(b"IEND", b"")


def tiff_orientation(value, big_endian=False, typ=3, count=1, extra=b""):
    """A TIFF block with one IFD0 entry: tag 0x0112."""
    e = ">" if big_endian else "<"
    head = (b"MM\0*" if big_endian else b"II*\0") + struct.pack(e + "I", 8)
    entries = 1
    ifd = struct.pack(e + "H", entries)
    data_at = 8 + 2 + 12 * entries + 4
    if typ in (5, 10):  # rational: value is (num, den), stored after the IFD
        body = struct.pack(e + "II", *value)
        ifd += struct.pack(e + "HHII", 0x0112, typ, count, data_at)
        return head + ifd + struct.pack(e + "I", 0) + body
    if typ == 3:
        vals = struct.pack(e + "H", value) + (struct.pack(e + "H", 1) if count == 2 else b"\0\0")
    elif typ == 4:
        vals = struct.pack(e + "I", value)
    elif typ == 1:
        vals = bytes([value, 0, 0, 0])
    else:
        raise ValueError(typ)
    ifd += struct.pack(e + "HHI", 0x0112, typ, count) + vals
    return head + ifd + struct.pack(e + "I", 0) + extra


manifest = []


def expect(name, data, note):
    path = os.path.join(OUT, name)
    with open(path, "wb") as f:
        f.write(data)
    try:
        im = ImageOps.exif_transpose(Image.open(path)).convert("RGB")
    except Exception as e:  # the reference refuses the file too
        manifest.append({"file": name, "pillow_error": f"{type(e).__name__}: {e}", "note": note})
        return
    with open(os.path.join(OUT, name + ".rgb"), "wb") as f:
        f.write(im.tobytes())
    manifest.append({"file": name, "rgb": name + ".rgb", "height": im.height, "width": im.width, "note": note})


W, H = 13, 9  # odd, non-square: every rotation shows


def grid(fn):
    return [[fn(x, y) for x in range(W)] for y in range(H)]


noise = rand(W * H * 8)


def n(i):
    return noise[i % len(noise)]


# ---- PNG ---------------------------------------------------------------------
g16 = grid(lambda x, y: ((n(y * W + x) << 8 | n(y * W + x + 500)) >> ((x + y) % 9),))  # many values < 256
expect("gray16.png", png(W, H, 16, 0, g16), "16-bit gray: Pillow mode I, clamped to 0..255 by convert('RGB')")
expect("rgb16.png", png(W, H, 16, 2, grid(lambda x, y: tuple(n(3 * (y * W + x) + c) * 256 + 255 - c * 100 for c in range(3)))),
       "16-bit RGB: the high byte")
expect("rgba16.png", png(W, H, 16, 6, grid(lambda x, y: tuple(n(4 * (y * W + x) + c) * 251 for c in range(4)))),
       "16-bit RGBA: the high byte, alpha dropped")
expect("la8.png", png(W, H, 8, 4, grid(lambda x, y: (n(y * W + x), n(y * W + x + 7)))), "LA: gray, alpha dropped")
expect("la16.png", png(W, H, 16, 4, grid(lambda x, y: (n(y * W + x) * 255 + 3, n(y * W + x + 7) * 256))),
       "16-bit LA: high byte")
for bits in (1, 2, 4):
    expect(f"gray{bits}.png", png(W, H, bits, 0, grid(lambda x, y: (n(y * W + x) % (1 << bits),))),
           f"{bits}-bit gray: replicated to 8 bits")
expect("gray8_trns.png", png(W, H, 8, 0, grid(lambda x, y: (n(y * W + x),)), trns=struct.pack(">H", 17)),
       "gray with tRNS: transparency ignored")
palette = bytes(rand(5 * 3))
expect("palette_trns.png", png(W, H, 8, 3, grid(lambda x, y: (n(y * W + x) % 5,)), plte=palette,
                               trns=bytes([0, 128, 255])), "palette + tRNS: looked up, alpha ignored")
expect("palette_short.png", png(W, H, 8, 3, grid(lambda x, y: (n(y * W + x) % 8,)), plte=palette),
       "indices past a 5-entry palette")
expect("palette4.png", png(W, H, 4, 3, grid(lambda x, y: (n(y * W + x) % 5,)), plte=palette), "4-bit palette")
expect("rgb8_interlaced.png", png(W, H, 8, 2, grid(lambda x, y: tuple(n(3 * (y * W + x) + c) for c in range(3))),
                                  interlace=True), "Adam7")
expect("gray2_interlaced.png", png(W, H, 2, 0, grid(lambda x, y: (n(y * W + x) % 4,)), interlace=True),
       "Adam7, 2-bit")
rgb8 = grid(lambda x, y: tuple(n(3 * (y * W + x) + c) for c in range(3)))
expect("exif6.png", png(W, H, 8, 2, rgb8, before=[chunk(b"eXIf", tiff_orientation(6))]), "eXIf orientation 6")
expect("exif3_after_idat.png", png(W, H, 8, 2, rgb8, after=[chunk(b"eXIf", tiff_orientation(3, True))]),
       "eXIf after IDAT, big-endian, orientation 3")
raw_profile = "\nexif\n      %d\n" % len(b"Exif\0\0" + tiff_orientation(8))
hexdata = (b"Exif\0\0" + tiff_orientation(8)).hex()
raw_profile += "\n".join(hexdata[i:i + 72] for i in range(0, len(hexdata), 72)) + "\n"
expect("raw_profile8.png", png(W, H, 8, 2, rgb8, before=[
    chunk(b"zTXt", b"Raw profile type exif\0\0" + zlib.compress(raw_profile.encode()))]),
       "zTXt 'Raw profile type exif', orientation 8")
xmp = '<x:xmpmeta><rdf:Description tiff:Orientation="5"/></x:xmpmeta>'
expect("xmp5.png", png(W, H, 8, 2, rgb8, before=[chunk(b"iTXt", b"XML:com.adobe.xmp\0\0\0\0\0" + xmp.encode())]),
       "XMP orientation 5 (no EXIF)")
expect("xmp_ignored.png", png(W, H, 8, 2, rgb8, before=[
    chunk(b"eXIf", tiff_orientation(1)), chunk(b"iTXt", b"XML:com.adobe.xmp\0\0\0\0\0" + xmp.encode())]),
       "EXIF orientation 1 present: XMP not read")

# ---- JPEG --------------------------------------------------------------------
rgb_img = Image.frombytes("RGB", (W, H), bytes(s for row in rgb8 for px in row for s in px))
smooth = Image.linear_gradient("L").resize((W * 3, H * 3)).convert("RGB")


def jpeg(img, **kw):
    b = io.BytesIO()
    img.save(b, "JPEG", **kw)
    return b.getvalue()


def with_app1(data, *payloads):
    segs = b"".join(b"\xff\xe1" + struct.pack(">H", len(p) + 2) + p for p in payloads)
    return data[:2] + segs + data[2:]


base_jpeg = jpeg(smooth, quality=90)
for o in range(0, 10):
    expect(f"orient{o}.jpg", with_app1(base_jpeg, b"Exif\0\0" + tiff_orientation(o, big_endian=o % 2 == 1)),
           f"orientation {o} ({'MM' if o % 2 else 'II'})")
expect("orient6_long.jpg", with_app1(base_jpeg, b"Exif\0\0" + tiff_orientation(6, typ=4)), "orientation as LONG")
expect("orient6_rational.jpg", with_app1(base_jpeg, b"Exif\0\0" + tiff_orientation((12, 2), typ=5)),
       "orientation as RATIONAL 12/2")
expect("orient6_byte.jpg", with_app1(base_jpeg, b"Exif\0\0" + tiff_orientation(6, typ=1)),
       "orientation as BYTE: bytes, no transform")
expect("orient6_count2.jpg", with_app1(base_jpeg, b"Exif\0\0" + tiff_orientation(6, count=2)),
       "orientation SHORT count 2: the first value")
expect("two_app1.jpg", with_app1(base_jpeg, b"Exif\0\0" + tiff_orientation(3), b"Exif\0\0" + tiff_orientation(6)),
       "two EXIF segments: the first counts")
expect("gray.jpg", jpeg(smooth.convert("L"), quality=85), "gray JPEG")
expect("progressive.jpg", jpeg(smooth, quality=80, progressive=True), "progressive")
expect("yuv444.jpg", jpeg(smooth, quality=95, subsampling=0), "4:4:4")
expect("yuv422.jpg", jpeg(smooth, quality=95, subsampling=1), "4:2:2")
expect("cmyk.jpg", jpeg(smooth.convert("CMYK"), quality=90), "CMYK: dgemma refuses it")

# ---- WebP --------------------------------------------------------------------
def webp(img, **kw):
    b = io.BytesIO()
    img.save(b, "WEBP", **kw)
    return b.getvalue()


alpha = Image.linear_gradient("L").resize((W * 3, H * 3))
rgba = smooth.copy()
rgba.putalpha(alpha)
expect("lossy.webp", webp(smooth, quality=80), "lossy")
expect("lossless.webp", webp(rgb_img, lossless=True), "lossless")
expect("lossy_alpha.webp", webp(rgba, quality=80), "lossy with alpha: non-premultiplied RGB")
expect("lossless_alpha.webp", webp(rgba, lossless=True), "lossless with alpha")
frame2 = Image.new("RGB", smooth.size, (200, 30, 90))
expect("animated.webp", webp(smooth, save_all=True, append_images=[frame2], duration=100, lossless=True),
       "animated: frame 0")
exif6 = Image.Exif()
exif6[0x0112] = 6
expect("exif6.webp", webp(smooth, quality=80, exif=exif6.tobytes()), "EXIF chunk orientation 6")

with open(os.path.join(OUT, "manifest.json"), "w") as f:
    json.dump({"made_by": "make_decode_refs.py, Pillow " + PIL.__version__, "cases": manifest}, f, indent=1)

# ---- resize --------------------------------------------------------------------
src_w, src_h = 37, 23
src = Image.frombytes("RGB", (src_w, src_h), rand(src_w * src_h * 3))
with open(os.path.join(RESIZE, "source.rgb"), "wb") as f:
    f.write(src.tobytes())
sizes = [(23, 60), (50, 37), (7, 5), (1, 1), (200, 3), (3, 200), (46, 74), (11, 37), (23, 37)]
resize_cases = []
for h, w in sizes:
    out = src.resize((w, h), Image.Resampling.BICUBIC)
    name = f"bicubic_{h}x{w}.rgb"
    with open(os.path.join(RESIZE, name), "wb") as f:
        f.write(out.tobytes())
    resize_cases.append({"height": h, "width": w, "rgb": name})
with open(os.path.join(RESIZE, "manifest.json"), "w") as f:
    json.dump({"made_by": "make_decode_refs.py, Pillow " + PIL.__version__, "source": "source.rgb",
               "source_height": src_h, "source_width": src_w, "cases": resize_cases}, f, indent=1)
print(f"{len(manifest)} decode cases, {len(resize_cases)} resize cases", file=sys.stderr)
