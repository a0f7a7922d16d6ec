#ifndef SHARDWISE_TOKENIZER_HUGGINGFACE_PATTERN_H_
#define SHARDWISE_TOKENIZER_HUGGINGFACE_PATTERN_H_

// Hugging Face's patterns, as tokenizer.json spells them ({"String": "..."}, matched
// literally, or {"Regex": "..."}), and how its Split cuts text by their matches (each of
// SplitDelimiterBehavior's ways, with `invert`), as the `tokenizers` library does.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "tokenizer/pre_split.h"

namespace shardwise {
namespace tokenizer {
namespace hf {

// A stretch of text and whether it is a match of the pattern.
struct Match {
  absl::string_view text;
  bool matched;
};

class Pattern {
 public:
  // `json` at `path` (for errors): {"String": S} or {"Regex": R}; INVALID_ARGUMENT naming
  // the path for anything else or a regex that does not compile.
  static absl::StatusOr<Pattern> FromJson(const nlohmann::json& json, const std::string& path);
  static Pattern Literal(std::string text);

  // `text` (valid UTF-8) cut into the pattern's matches (leftmost, not overlapping) and
  // the stretches between them, in order; together they are `text`.
  std::vector<Match> Find(absl::string_view text) const;
  // `text` with every match replaced by `content`.
  std::string Replace(absl::string_view text, absl::string_view content) const;

 private:
  std::string literal_;
  std::shared_ptr<const PreSplitter> regex_;  // null: the literal
};

// `text` cut at each character for which `predicate` holds, each such character a match.
std::vector<Match> FindCharacters(absl::string_view text,
                                  const std::function<bool(char32_t)>& predicate);

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// SplitDelimiterBehavior's name in tokenizer.json ("Removed", ...); INVALID_ARGUMENT
// naming `path` and the value otherwise.
absl::StatusOr<SplitBehavior> SplitBehaviorFromJson(const nlohmann::json& json,
                                                    const std::string& path);

// The pieces `matches` make under `behavior` (matches and stretches swapped first when
// `invert`), as views into the text the matches are of; empty pieces are dropped.
std::vector<absl::string_view> SplitBy(std::vector<Match> matches, SplitBehavior behavior,
                                       bool invert);

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_HUGGINGFACE_PATTERN_H_
