#ifndef SHARDWISE_TOKENIZER_PATTERN_DIALECT_H_
#define SHARDWISE_TOKENIZER_PATTERN_DIALECT_H_

// Pre-split patterns are written for other engines than the PCRE2 that runs them here:
// tiktoken's and GPT-2's for Rust's regex (fancy-regex) and Python's `regex`, Hugging
// Face's tokenizer.json files for Oniguruma. Where PCRE2 reads a construct otherwise,
// the pattern is rewritten into one PCRE2 reads as the source engine does; where no
// rewrite is exact, or the construct is PCRE2's alone, it is refused, never run with
// another meaning.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardwise {
namespace tokenizer {

enum class PatternDialect {
  // tiktoken's and GPT-2's patterns: `^` and `$` at the text's ends.
  kTiktoken,
  // Oniguruma's, which Hugging Face's files are written for: `^` and `$` at each line's
  // ends too, `\w` an alphabetic (letters, letter numbers, circled letters), mark,
  // decimal digit or connector punctuation (and `\b` its boundary), `\h` a hex digit.
  kOniguruma,
};

// `pattern` as PCRE2 (with PCRE2_UTF and PCRE2_UCP) must read it to match what `dialect`
// matches:
//   - `\s` is Unicode's White_Space, as in all three source engines (PCRE2 10.42 adds
//     U+180E), and `\S` its complement;
//   - in kOniguruma, `\w`, `\W`, `\h` and `\H` as above (PCRE2's `\w` has no marks, and
//     its `\h` is horizontal space), and `\b` and `\B` outside a class at the
//     boundaries of that `\w` (PCRE2's follow its own).
// INVALID_ARGUMENT, naming the construct and its byte offset, for one that only PCRE2
// reads (backtracking and option verbs `(*...)`, which may also lower PCRE2's match
// limits until a match fails; recursion `(?R)`, `(?1)`, `(?&name)`, `(?P>name)`;
// callouts `(?C)`), and for one no rewrite keeps exact: `\S`, `\W` or `\H` inside a
// character class, a class nested in another or `&&` (Oniguruma's class operations).
absl::StatusOr<std::string> PatternForPcre2(absl::string_view pattern, PatternDialect dialect);

}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_PATTERN_DIALECT_H_
