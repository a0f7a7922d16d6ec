#ifndef SHARDWISE_TOKENIZER_HUGGINGFACE_UNICODE_TEXT_H_
#define SHARDWISE_TOKENIZER_HUGGINGFACE_UNICODE_TEXT_H_

// The Unicode operations Hugging Face's tokenizers apply to text, as Rust defines them
// (the `tokenizers` library is Rust): normalisation forms (ICU's, the same Unicode data),
// lowercase per character (Rust's char::to_lowercase, full mappings, no context), and the
// character classes its components test (char::is_whitespace, is_numeric,
// is_alphanumeric). Text is UTF-8; where it is not valid, each invalid byte stands for
// U+FFFD (as text decoded with replacement, which is how a Python str would hold it).

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"

namespace shardwise {
namespace tokenizer {
namespace hf {

enum class NormalForm { kNfc, kNfkc, kNfd, kNfkd };

// `text` with its invalid bytes replaced by U+FFFD.
std::string ValidUtf8(absl::string_view text);

// `text` (valid UTF-8) in normal form `form`.
std::string Normalize(absl::string_view text, NormalForm form);

// `text` (valid UTF-8) with each character lowercased on its own.
std::string Lowercase(absl::string_view text);

// Calls `character(code_point, its_bytes)` for each character of valid UTF-8 `text`.
void ForEachCharacter(absl::string_view text,
                      absl::FunctionRef<void(char32_t, absl::string_view)> character);

bool IsWhitespace(char32_t c);    // White_Space
bool IsNumeric(char32_t c);       // general category Nd, Nl or No
bool IsAlphanumeric(char32_t c);  // Alphabetic or numeric
// A word character as Rust's regex `\w` has it (the library's single_word test):
// Alphabetic, a mark (Mn, Mc, Me), a decimal digit (Nd), connector punctuation (Pc) or
// Join_Control.
bool IsRegexWordCharacter(char32_t c);

// The code point's UTF-8.
std::string Utf8(char32_t c);

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_HUGGINGFACE_UNICODE_TEXT_H_
