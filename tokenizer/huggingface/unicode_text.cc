#include "tokenizer/huggingface/unicode_text.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>
#include <unicode/utf8.h>

#include <algorithm>

#include "tokenizer/utf8.h"

namespace shardwise {
namespace tokenizer {
namespace hf {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";

const icu::Normalizer2* NormalizerOf(NormalForm form) {
  UErrorCode error = U_ZERO_ERROR;
  switch (form) {
    case NormalForm::kNfc:
      return icu::Normalizer2::getNFCInstance(error);
    case NormalForm::kNfkc:
      return icu::Normalizer2::getNFKCInstance(error);
    case NormalForm::kNfd:
      return icu::Normalizer2::getNFDInstance(error);
    case NormalForm::kNfkd:
      return icu::Normalizer2::getNFKDInstance(error);
  }
  return nullptr;
}

}  // namespace

std::string ValidUtf8(absl::string_view text) {
  std::string valid;
  while (!text.empty()) {
    const size_t prefix = ValidUtf8Prefix(text);
    valid.append(text.data(), prefix);
    if (prefix == text.size()) break;
    text.remove_prefix(prefix);
    // One U+FFFD for the ill-formed sequence's maximal subpart (ICU's U8_NEXT consumes
    // it), as Python's errors="replace" and Rust's from_utf8_lossy do: "\xE2\x82A" is
    // one replacement and "A", not two.
    const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
    int32_t consumed = 0;
    UChar32 c;
    U8_NEXT(bytes, consumed, static_cast<int32_t>(std::min<size_t>(text.size(), 4)), c);
    valid += kReplacement;
    text.remove_prefix(std::max<int32_t>(1, consumed));
  }
  return valid;
}

std::string Normalize(absl::string_view text, NormalForm form) {
  const icu::Normalizer2* normalizer = NormalizerOf(form);
  UErrorCode error = U_ZERO_ERROR;
  const icu::UnicodeString source = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  const icu::UnicodeString normal = normalizer->normalize(source, error);
  std::string out;
  if (U_FAILURE(error)) return std::string(text);  // ICU's data missing: unchanged
  normal.toUTF8String(out);
  return out;
}

void ForEachCharacter(absl::string_view text,
                      absl::FunctionRef<void(char32_t, absl::string_view)> character) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  const int32_t length = static_cast<int32_t>(text.size());
  int32_t i = 0;
  while (i < length) {
    const int32_t start = i;
    UChar32 c;
    U8_NEXT(bytes, i, length, c);
    character(c < 0 ? 0xFFFD : static_cast<char32_t>(c), text.substr(start, i - start));
  }
}

std::string Lowercase(absl::string_view text) {
  std::string out;
  ForEachCharacter(text, [&](char32_t c, absl::string_view bytes) {
    // Full mappings of the character alone (root locale, no context): Rust's to_lowercase.
    UChar source[2];
    int32_t source_length = 0;
    U16_APPEND_UNSAFE(source, source_length, static_cast<UChar32>(c));
    UChar lower[8];
    UErrorCode error = U_ZERO_ERROR;
    const int32_t n = u_strToLower(lower, 8, source, source_length, "", &error);
    if (U_FAILURE(error)) {
      out.append(bytes.data(), bytes.size());
      return;
    }
    icu::UnicodeString(lower, n).toUTF8String(out);
  });
  return out;
}

bool IsWhitespace(char32_t c) {
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE);
}

bool IsNumeric(char32_t c) {
  const int8_t type = u_charType(static_cast<UChar32>(c));
  return type == U_DECIMAL_DIGIT_NUMBER || type == U_LETTER_NUMBER || type == U_OTHER_NUMBER;
}

bool IsAlphanumeric(char32_t c) {
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_ALPHABETIC) || IsNumeric(c);
}

bool IsRegexWordCharacter(char32_t c) {
  const UChar32 u = static_cast<UChar32>(c);
  if (u_hasBinaryProperty(u, UCHAR_ALPHABETIC) || u_hasBinaryProperty(u, UCHAR_JOIN_CONTROL)) {
    return true;
  }
  switch (u_charType(u)) {
    case U_NON_SPACING_MARK:
    case U_COMBINING_SPACING_MARK:
    case U_ENCLOSING_MARK:
    case U_DECIMAL_DIGIT_NUMBER:
    case U_CONNECTOR_PUNCTUATION:
      return true;
    default:
      return false;
  }
}

std::string Utf8(char32_t c) {
  std::string out;
  icu::UnicodeString(static_cast<UChar32>(c)).toUTF8String(out);
  return out;
}

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise
