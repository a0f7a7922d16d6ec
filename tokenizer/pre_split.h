#ifndef SHARDWISE_TOKENIZER_PRE_SPLIT_H_
#define SHARDWISE_TOKENIZER_PRE_SPLIT_H_

// The pre-split of byte-level BPE: a regular expression (GPT-2's, cl100k's, ...) cuts the
// text into pieces that are encoded apart. PCRE2 with Unicode properties and its JIT.
// Text that is not valid UTF-8 (utf8.h) is cut around each invalid byte, which is a piece of its
// own (the patterns are defined on characters; bytes that form none get their byte token).

#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tokenizer/pattern_dialect.h"

namespace shardwise {
namespace tokenizer {

class PreSplitter {
 public:
  // `pattern` as the engine of `dialect` reads it (pattern_dialect.h: rewritten for PCRE2,
  // or refused). INVALID_ARGUMENT naming the pattern's error and where it is.
  static absl::StatusOr<PreSplitter> Create(absl::string_view pattern,
                                            PatternDialect dialect = PatternDialect::kTiktoken);

  // Calls `piece` with each piece of `text`, in order; together they are `text`.
  void Split(absl::string_view text, absl::FunctionRef<void(absl::string_view)> piece) const;

  // The pattern's matches in valid UTF-8 `text` and the stretches between them, in order,
  // each with whether it is a match (Hugging Face's Split pre-tokenizer needs to know).
  // An empty match is an empty matched piece, the character there left to the stretch
  // after it, and no empty match is taken where the previous match ended: Rust's regex
  // and Oniguruma iterate so, which Hugging Face's patterns use ("^" replaced by "_"
  // prepends "_").
  void Matches(absl::string_view text,
               absl::FunctionRef<void(absl::string_view, bool matched)> piece) const;

 private:
  struct Code;
  explicit PreSplitter(std::shared_ptr<const Code> code) : code_(std::move(code)) {}

  std::shared_ptr<const Code> code_;
};

}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_PRE_SPLIT_H_
