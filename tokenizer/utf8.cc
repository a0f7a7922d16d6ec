#include "tokenizer/utf8.h"

#include <cstdint>

namespace shardwise {
namespace tokenizer {

size_t Utf8CharLength(absl::string_view text) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  size_t length;
  uint32_t lowest, code;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, lowest = 0x80, code = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, lowest = 0x800, code = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, lowest = 0x10000, code = lead & 0x07;
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i) & 0x3F);
  }
  if (code < lowest || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return length;
}

size_t ValidUtf8Prefix(absl::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {  // the common case, byte by byte
      ++i;
      continue;
    }
    const size_t length = Utf8CharLength(text.substr(i));
    if (length == 0) break;
    i += length;
  }
  return i;
}

}  // namespace tokenizer
}  // namespace shardwise
