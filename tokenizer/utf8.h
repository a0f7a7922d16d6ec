#ifndef SHARDWISE_TOKENIZER_UTF8_H_
#define SHARDWISE_TOKENIZER_UTF8_H_

// UTF-8 validity, strict: no overlong forms, no surrogates, nothing past U+10FFFF.

#include <cstddef>

#include "absl/strings/string_view.h"

namespace shardwise {
namespace tokenizer {

// The length of the character at text[0], or 0 when it is not a valid one.
size_t Utf8CharLength(absl::string_view text);

// The length of the longest prefix of `text` that is valid UTF-8.
size_t ValidUtf8Prefix(absl::string_view text);

}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_UTF8_H_
