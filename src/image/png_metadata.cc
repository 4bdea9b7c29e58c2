#include "image/png_metadata.h"

#include <zlib.h>

#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "image/exif_orientation.h"

namespace dgemma::image {
namespace {

// Pillow's cap on a decompressed text chunk (1 MiB); a larger one is not read.
constexpr size_t kMaxTextBytes = size_t(1) << 20;

uint32_t be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

std::optional<std::string> inflate_text(std::string_view in) {
  z_stream z{};
  if (inflateInit(&z) != Z_OK) return std::nullopt;
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = uInt(in.size());
  char buf[16384];
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
    if (out.size() > kMaxTextBytes) rc = Z_MEM_ERROR;
    if (rc == Z_BUF_ERROR && z.avail_in == 0) break;  // ended early: what was inflated
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END && rc != Z_BUF_ERROR) return std::nullopt;
  return out;
}

// One text value as Pillow keeps it under its key: raw bytes for the "exif"
// key of tEXt, text otherwise (docs/image.md §4.2).
struct TextValue {
  std::string bytes;
  bool usable_as_exif = false;  // only tEXt "exif" and eXIf chunks are bytes
};

using Info = std::map<std::string, TextValue, std::less<>>;

void read_text_chunk(std::string_view type, std::string_view data, Info& info) {
  const size_t nul = data.find('\0');
  std::string_view key = data.substr(0, nul);
  std::string_view rest = nul == std::string_view::npos ? std::string_view() : data.substr(nul + 1);
  if (key.empty()) return;
  if (type == "tEXt") {
    info[std::string(key)] = TextValue{std::string(rest), key == "exif"};
  } else if (type == "zTXt") {
    if (!rest.empty() && rest[0] != 0) return;
    const std::optional<std::string> text = rest.empty() ? std::string() : inflate_text(rest.substr(1));
    info[std::string(key)] = TextValue{text.value_or(std::string()), false};
  } else {  // iTXt: flag, method, language\0, translated keyword\0, text
    if (rest.size() < 2) return;
    const bool compressed = rest[0] != 0;
    const char method = rest[1];
    std::string_view r = rest.substr(2);
    const size_t a = r.find('\0');
    if (a == std::string_view::npos) return;
    const size_t b = r.find('\0', a + 1);
    if (b == std::string_view::npos) return;
    std::string_view text = r.substr(b + 1);
    std::string inflated;
    if (compressed) {
      if (method != 0) return;
      const std::optional<std::string> t = inflate_text(text);
      if (!t) return;
      inflated = *t;
      text = inflated;
    }
    info[std::string(key)] = TextValue{std::string(text), false};
  }
}

// "Raw profile type exif": after the first three lines, hex digits with
// whitespace between pairs. Empty when malformed.
std::optional<std::vector<uint8_t>> raw_profile_bytes(std::string_view text) {
  size_t at = 0;
  for (int line = 0; line < 3; ++line) {
    at = text.find('\n', at);
    if (at == std::string_view::npos) return std::vector<uint8_t>();
    at += 1;
  }
  std::vector<uint8_t> out;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\x0b' || c == '\x0c'; };
  for (size_t i = at; i < text.size();) {
    const char c = text[i];
    if (c == '\n' || space(c)) {  // newlines are joined away; whitespace is skipped
      ++i;
      continue;
    }
    if (i + 1 >= text.size()) return std::nullopt;
    const int hi = hex(c), lo = hex(text[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(uint8_t(hi * 16 + lo));
    i += 2;
  }
  return out;
}

}  // namespace

int png_orientation(std::span<const uint8_t> png) {
  // Pillow's view of the metadata: the chunks before the image data; and,
  // only when those hold no EXIF, every chunk up to IEND (docs/image.md §4.2).
  Info before_idat, all;
  bool seen_idat = false;
  for (size_t at = 8; at + 8 <= png.size();) {
    const uint32_t length = be32(png.data() + at);
    const std::string_view type(reinterpret_cast<const char*>(png.data() + at + 4), 4);
    if (length > png.size() - at - 8) break;
    const std::string_view data(reinterpret_cast<const char*>(png.data() + at + 8), length);
    if (type == "IEND") break;
    if (type == "IDAT" && !seen_idat) {
      seen_idat = true;
      before_idat = all;
    }
    if (type == "eXIf") {
      all["exif"] = TextValue{std::string("Exif\0\0", 6) + std::string(data), true};
    } else if (type == "tEXt" || type == "zTXt" || type == "iTXt") {
      read_text_chunk(type, data, all);
    }
    at += 12 + size_t(length);
  }
  if (!seen_idat) before_idat = all;
  const Info& info = before_idat.count("exif") ? before_idat : all;
  std::optional<std::vector<uint8_t>> exif;
  if (auto it = info.find("exif"); it != info.end()) {
    if (it->second.usable_as_exif) {
      exif = std::vector<uint8_t>(it->second.bytes.begin(), it->second.bytes.end());
    } else {
      return 1;  // text Pillow cannot read as EXIF
    }
  } else if (auto raw = info.find("Raw profile type exif"); raw != info.end()) {
    exif = raw_profile_bytes(raw->second.bytes);
    if (!exif) return 1;
  }
  if (exif) {
    if (exif_has_orientation(*exif)) return exif_orientation(*exif);
  }
  if (auto xmp = info.find("XML:com.adobe.xmp"); xmp != info.end()) {
    const int o = xmp_orientation(xmp->second.bytes);
    if (o >= 2 && o <= 8) return o;
  }
  return 1;
}

}  // namespace dgemma::image
