#ifndef SHARDWISE_COMMON_JSON_DEPTH_H_
#define SHARDWISE_COMMON_JSON_DEPTH_H_

// How deep a JSON text nests, found before it is parsed: each level of a parsed value costs
// memory, and a file of nothing but '[' would otherwise take gigabytes (a checkpoint's
// config.json, a tokenizer.json, both files someone else chose).

#include <algorithm>

#include "absl/strings/string_view.h"

namespace shardwise {

// The deepest nesting of `text`'s arrays and objects, counted outside strings; the scan
// stops once past `limit`, so the answer is at most limit + 1.
inline int JsonNestingDepth(absl::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size() && deepest <= limit; ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_JSON_DEPTH_H_
