// Decodes a PNG file into RGB pixels, enough for a test to tell a blank screenshot from one
// with content: 8-bit RGB or RGBA (what Chromium's --screenshot writes), not interlaced.
// zlib inflates the IDAT stream; the five PNG row filters are undone here (PNG spec, 9.2).
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace pngtest {

struct Image {
  uint32_t width = 0;
  uint32_t height = 0;
  std::vector<uint8_t> rgb;  // width * height * 3
  std::string error;         // empty when decoded
};

inline uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

inline Image decode_png(const std::string& path) {
  Image img;
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> f((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
  static const uint8_t kSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (f.size() < 8 || !std::equal(kSig, kSig + 8, f.begin())) {
    img.error = "not a PNG file";
    return img;
  }
  uint32_t channels = 0;
  std::vector<uint8_t> idat;
  for (size_t at = 8; at + 12 <= f.size();) {
    const uint32_t len = be32(&f[at]);
    if (at + 12 + len > f.size()) break;
    const std::string type(reinterpret_cast<const char*>(&f[at + 4]), 4);
    const uint8_t* data = &f[at + 8];
    if (type == "IHDR" && len >= 13) {
      img.width = be32(data);
      img.height = be32(data + 4);
      const uint8_t depth = data[8], color = data[9], interlace = data[12];
      channels = color == 2 ? 3 : color == 6 ? 4 : 0;
      if (depth != 8 || channels == 0 || interlace != 0) {
        img.error = "unsupported PNG (want 8-bit RGB/RGBA, not interlaced)";
        return img;
      }
    } else if (type == "IDAT") {
      idat.insert(idat.end(), data, data + len);
    }
    at += 12 + len;
  }
  if (channels == 0 || img.width == 0 || img.height == 0) {
    img.error = "no IHDR";
    return img;
  }
  const size_t stride = size_t{img.width} * channels;
  std::vector<uint8_t> raw(img.height * (stride + 1));
  uLongf raw_len = raw.size();
  if (uncompress(raw.data(), &raw_len, idat.data(), idat.size()) != Z_OK || raw_len != raw.size()) {
    img.error = "IDAT does not inflate to the image's size";
    return img;
  }
  std::vector<uint8_t> prev(stride, 0), cur(stride);
  img.rgb.reserve(size_t{img.width} * img.height * 3);
  for (uint32_t y = 0; y < img.height; ++y) {
    const uint8_t filter = raw[y * (stride + 1)];
    const uint8_t* src = &raw[y * (stride + 1) + 1];
    for (size_t x = 0; x < stride; ++x) {
      const int a = x >= channels ? cur[x - channels] : 0;
      const int b = prev[x];
      const int c = x >= channels ? prev[x - channels] : 0;
      int pred = 0;
      switch (filter) {
        case 0:
          pred = 0;
          break;
        case 1:
          pred = a;
          break;
        case 2:
          pred = b;
          break;
        case 3:
          pred = (a + b) / 2;
          break;
        case 4: {
          const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          pred = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default:
          img.error = "bad PNG row filter";
          return img;
      }
      cur[x] = static_cast<uint8_t>(src[x] + pred);
    }
    for (uint32_t x = 0; x < img.width; ++x)
      img.rgb.insert(img.rgb.end(), &cur[x * channels], &cur[x * channels] + 3);
    prev.swap(cur);
  }
  return img;
}

}  // namespace pngtest
