#include "image/exif_orientation.h"

#include <cmath>
#include <cstring>
#include <optional>

namespace dgemma::image {
namespace {

// What IFD0's last readable orientation entry holds (docs/image.md §4.1):
// nothing, or the first value of a numeric entry as a double (which compares
// equal to 2..8 only when it is that integer), or a non-numeric entry.
struct OrientationEntry {
  bool present = false;
  std::optional<double> value;
};

struct Reader {
  std::span<const uint8_t> d;
  bool big_endian = false;
  bool has(uint64_t at, uint64_t n) const { return at <= d.size() && n <= d.size() - at; }
  uint64_t u(uint64_t at, int n) const {
    uint64_t v = 0;
    for (int k = 0; k < n; ++k) {
      const uint64_t byte = d[size_t(at) + size_t(big_endian ? k : n - 1 - k)];
      v = (v << 8) | byte;
    }
    return v;
  }
};

// Bytes per value of each TIFF type Pillow reads (others are skipped).
int type_size(uint16_t type) {
  switch (type) {
    case 1:
    case 2:
    case 6:
    case 7: return 1;  // BYTE ASCII SBYTE UNDEFINED
    case 3:
    case 8: return 2;  // SHORT SSHORT
    case 4:
    case 9:
    case 11:
    case 13: return 4;  // LONG SLONG FLOAT IFD
    case 5:
    case 10:
    case 12:
    case 16: return 8;  // RATIONAL SRATIONAL DOUBLE LONG8
    default: return 0;
  }
}

// The first value of a numeric entry, as Pillow would compare it.
std::optional<double> first_value(const Reader& r, uint16_t type, uint64_t at) {
  switch (type) {
    case 3: return double(r.u(at, 2));
    case 4:
    case 13: return double(r.u(at, 4));
    case 16: return double(r.u(at, 8));
    case 6: return double(int8_t(r.u(at, 1)));
    case 8: return double(int16_t(r.u(at, 2)));
    case 9: return double(int32_t(r.u(at, 4)));
    case 5:
    case 10: {
      const uint32_t num = uint32_t(r.u(at, 4)), den = uint32_t(r.u(at + 4, 4));
      const double n = type == 5 ? double(num) : double(int32_t(num));
      const double q = type == 5 ? double(den) : double(int32_t(den));
      // A fraction equals 2..8 only when it is that integer exactly; a zero
      // denominator is Pillow's NaN, equal to nothing.
      if (q == 0 || std::fmod(n, q) != 0) return std::nullopt;
      return n / q;
    }
    case 11: {
      const uint32_t bits = uint32_t(r.u(at, 4));
      float f;
      std::memcpy(&f, &bits, 4);
      return double(f);
    }
    case 12: {
      const uint64_t bits = r.u(at, 8);
      double f;
      std::memcpy(&f, &bits, 8);
      return f;
    }
    default: return std::nullopt;  // BYTE, ASCII, UNDEFINED: bytes or text, never a number
  }
}

OrientationEntry find_orientation(std::span<const uint8_t> exif) {
  OrientationEntry found;
  if (exif.size() >= 6 && std::memcmp(exif.data(), "Exif\0\0", 6) == 0) exif = exif.subspan(6);
  Reader r{exif};
  if (exif.size() < 8) return found;
  if (std::memcmp(exif.data(), "II", 2) == 0) {
    r.big_endian = false;
  } else if (std::memcmp(exif.data(), "MM", 2) == 0) {
    r.big_endian = true;
  } else {
    return found;
  }
  // Classic TIFF only: Pillow 9.4 cannot read a BigTIFF header in EXIF.
  if (r.u(2, 2) != 42) return found;
  const uint64_t ifd = r.u(4, 4);
  constexpr int count_size = 2, entry_size = 12, inline_size = 4;
  if (!r.has(ifd, uint64_t(count_size))) return found;
  const uint64_t n = r.u(ifd, count_size);
  // Entries are read until the data runs out; those read so far count.
  for (uint64_t k = 0; k < n; ++k) {
    const uint64_t at = ifd + uint64_t(count_size) + k * uint64_t(entry_size);
    if (!r.has(at, uint64_t(entry_size))) break;
    const uint16_t tag = uint16_t(r.u(at, 2)), type = uint16_t(r.u(at + 2, 2));
    const uint64_t count = r.u(at + 4, 4);
    const int unit = type_size(type);
    if (unit == 0) continue;
    const uint64_t size = count * uint64_t(unit);
    uint64_t data = at + 8;
    if (size > uint64_t(inline_size)) {
      data = r.u(data, inline_size);
      if (!r.has(data, size)) continue;  // Pillow skips the tag
    }
    if (size == 0) continue;
    if (tag != 0x0112) continue;
    found.present = true;
    found.value = first_value(r, type, data);
  }
  return found;
}

}  // namespace

int exif_orientation(std::span<const uint8_t> exif) {
  const OrientationEntry e = find_orientation(exif);
  if (!e.value) return 1;
  const double v = *e.value;
  for (int o = 2; o <= 8; ++o) {
    if (v == double(o)) return o;
  }
  return 1;
}

bool exif_has_orientation(std::span<const uint8_t> exif) { return find_orientation(exif).present; }

int xmp_orientation(std::string_view xmp) {
  static constexpr std::string_view kKey = "tiff:Orientation";
  for (size_t at = xmp.find(kKey); at != std::string_view::npos; at = xmp.find(kKey, at + 1)) {
    size_t p = at + kKey.size();
    if (p < xmp.size() && xmp[p] == '>') {
      p += 1;
    } else if (p + 1 < xmp.size() && xmp[p] == '=' && xmp[p + 1] == '"') {
      p += 2;
    } else {
      continue;
    }
    if (p < xmp.size() && xmp[p] >= '0' && xmp[p] <= '9') return xmp[p] - '0';
  }
  return 0;
}

}  // namespace dgemma::image
