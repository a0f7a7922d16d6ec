#include "tokenizer/terminal_text.h"

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "tokenizer/utf8.h"

namespace shardwise {
namespace tokenizer {

std::string ForTerminal(const std::string& text) {
  std::string out;
  absl::string_view rest = text;
  while (!rest.empty()) {
    const size_t valid = ValidUtf8Prefix(rest);
    for (size_t i = 0; i < valid; ++i) {
      const auto c = static_cast<unsigned char>(rest[i]);
      const bool c1 = c == 0xC2 && i + 1 < valid && static_cast<unsigned char>(rest[i + 1]) < 0xA0;
      if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) {
        absl::StrAppendFormat(&out, "\\x%02x", c);
      } else if (c1) {  // U+0080..U+009F
        absl::StrAppendFormat(&out, "\\x%02x\\x%02x", c, static_cast<unsigned char>(rest[++i]));
      } else {
        out.push_back(static_cast<char>(c));
      }
    }
    if (valid == rest.size()) break;
    absl::StrAppendFormat(&out, "\\x%02x", static_cast<unsigned char>(rest[valid]));
    rest.remove_prefix(valid + 1);
  }
  return out;
}

}  // namespace tokenizer
}  // namespace shardwise
