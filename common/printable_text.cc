#include "common/printable_text.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace shardwise {
namespace {

// The code point starting at text[*i] (advancing *i past it), or -1 for a byte sequence
// that is not UTF-8 (overlong forms and surrogates included).
int32_t DecodeUtf8(absl::string_view text, size_t* i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(*i);
  int length = 0;
  int32_t code = 0, minimum = 0;
  if (lead < 0x80) {
    ++*i;
    return lead;
  } else if ((lead & 0xe0) == 0xc0) {
    length = 2, code = lead & 0x1f, minimum = 0x80;
  } else if ((lead & 0xf0) == 0xe0) {
    length = 3, code = lead & 0x0f, minimum = 0x800;
  } else if ((lead & 0xf8) == 0xf0) {
    length = 4, code = lead & 0x07, minimum = 0x10000;
  } else {
    return -1;
  }
  if (*i + length > text.size()) return -1;
  for (int k = 1; k < length; ++k) {
    if ((byte(*i + k) & 0xc0) != 0x80) return -1;
    code = code << 6 | (byte(*i + k) & 0x3f);
  }
  if (code < minimum || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return -1;
  *i += length;
  return code;
}

bool IsUnprintable(int32_t code) {
  return code < 0x20 || (code >= 0x7f && code <= 0x9f) || code == 0x2028 || code == 0x2029 ||
         (code >= 0x202a && code <= 0x202e) || (code >= 0x2066 && code <= 0x2069);
}

}  // namespace

absl::StatusOr<int64_t> CountPrintableCharacters(const std::string& text) {
  int64_t count = 0;
  for (size_t i = 0; i < text.size();) {
    const int32_t code = DecodeUtf8(text, &i);
    if (code < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("is not valid UTF-8 (at character ", count + 1, ")"));
    }
    if (IsUnprintable(code)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "contains the control character U+%04X at character %d; only printable text is allowed",
          code, count + 1));
    }
    ++count;
  }
  return count;
}

absl::Status CheckPrintableField(const std::string& field, const std::string& text,
                                 int64_t max_characters) {
  auto length = CountPrintableCharacters(text);
  if (!length.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", length.status().message()));
  }
  if (*length > max_characters) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": is ", *length, " characters long; at most ", max_characters, " are allowed"));
  }
  return absl::OkStatus();
}

std::string ShownValue(absl::string_view value, size_t max_bytes) {
  const absl::string_view shown = value.substr(0, max_bytes);
  std::string out;
  for (size_t i = 0; i < shown.size();) {
    const size_t start = i;
    const int32_t code = DecodeUtf8(shown, &i);
    if (code < 0) {
      absl::StrAppend(&out, absl::StrFormat("\\x%02X", static_cast<unsigned char>(shown[start])));
      i = start + 1;
    } else if (IsUnprintable(code)) {
      absl::StrAppend(&out, absl::StrFormat("\\u{%04X}", code));
    } else {
      out.append(shown.data() + start, i - start);
    }
  }
  if (shown.size() < value.size()) absl::StrAppend(&out, "... (", value.size(), " bytes)");
  return out;
}

std::string ShownNumber(double value) {
  // %g's six digits where they read back as `value` (500000, not to_chars' 5e+05), more
  // where they do not: 17 always do.
  std::string text = absl::StrFormat("%g", value);  // inf, nan
  for (int digits = 7; std::isfinite(value) && digits <= 17; ++digits) {
    if (std::strtod(text.c_str(), nullptr) == value) break;
    text = absl::StrFormat("%.*g", digits, value);
  }
  return text;
}

}  // namespace shardwise
