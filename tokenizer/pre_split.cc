#include "tokenizer/pre_split.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>

// 8-bit code units: the text is UTF-8 bytes. Defined here, not in the build graph, so the
// fuzz build (tests/fuzz/run.sh), which compiles the sources alone, sees it too.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "absl/strings/str_cat.h"
#include "tokenizer/utf8.h"

namespace shardwise {
namespace tokenizer {

struct PreSplitter::Code {
  ~Code() { pcre2_code_free(code); }
  pcre2_code* code = nullptr;
};

namespace {

// Match data and a JIT stack for each thread (pcre2_match's scratch space, which a
// compiled pattern shared between threads cannot hold). Up to 8 MB of JIT stack serves
// the longest runs the patterns match (a possessive \p{L}++ over a huge word); a match
// that needs more runs in the interpreter, on the heap. PCRE2's default limits (10
// million backtracks) are lifted: Llama 3's `\s*[\r\n]+` over 10 million spaces reaches
// them, and a piece is never cut short by a limit (Oniguruma, Hugging Face's engine,
// has none by default).
struct MatchScratch {
  MatchScratch() {
    data = pcre2_match_data_create(16, nullptr);
    stack = pcre2_jit_stack_create(size_t{32} << 10, size_t{8} << 20, nullptr);
    context = pcre2_match_context_create(nullptr);
    pcre2_jit_stack_assign(context, nullptr, stack);
    pcre2_set_match_limit(context, UINT32_MAX);
    pcre2_set_depth_limit(context, UINT32_MAX);
    pcre2_set_heap_limit(context, UINT32_MAX);
  }
  ~MatchScratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
  pcre2_match_data* data;
  pcre2_jit_stack* stack;
  pcre2_match_context* context;
};

MatchScratch& Scratch() {
  thread_local MatchScratch scratch;
  return scratch;
}

// pcre2_match of `code` at `position`: its result, a match or PCRE2_ERROR_NOMATCH. A match
// past the JIT's stack runs again in the interpreter.
int Match(const pcre2_code* code, PCRE2_SPTR subject, size_t size, size_t position,
          MatchScratch& scratch) {
  int rc =
      pcre2_match(code, subject, size, position, PCRE2_NO_UTF_CHECK, scratch.data, scratch.context);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
    rc = pcre2_match(code, subject, size, position, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, scratch.data,
                     scratch.context);
  }
  if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
    // Out of memory, with the limits lifted: pieces cut short here would give other ids
    // than the tokenizer's, silently. Encode has no error to return: the process stops.
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(rc, message, sizeof(message));
    std::fprintf(stderr, "the pre-split pattern failed to match at byte %zu of %zu: %s\n", position,
                 size, reinterpret_cast<const char*>(message));
    std::abort();
  }
  return rc;
}

}  // namespace

absl::StatusOr<PreSplitter> PreSplitter::Create(absl::string_view pattern, PatternDialect dialect) {
  auto rewritten = PatternForPcre2(pattern, dialect);
  if (!rewritten.ok()) return rewritten.status();
  int error = 0;
  PCRE2_SIZE offset = 0;
  auto code = std::make_shared<Code>();
  // \C (one byte, whatever the character) would make pieces that are not UTF-8, which the
  // matches after it read as UTF-8 unchecked; Oniguruma refuses it too.
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C |
                           (dialect == PatternDialect::kOniguruma ? PCRE2_MULTILINE : 0);
  code->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten->data()), rewritten->size(),
                             options, &error, &offset, nullptr);
  if (code->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return absl::InvalidArgumentError(
        absl::StrCat("the pre-split pattern does not compile at ", offset,
                     *rewritten == pattern ? "" : " (of the pattern as rewritten for PCRE2)", ": ",
                     reinterpret_cast<const char*>(message)));
  }
  // Without the JIT (a platform that has none) pcre2_match interprets: slower, same pieces.
  (void)pcre2_jit_compile(code->code, PCRE2_JIT_COMPLETE);
  return PreSplitter(std::move(code));
}

void PreSplitter::Split(absl::string_view text,
                        absl::FunctionRef<void(absl::string_view)> piece) const {
  while (!text.empty()) {
    const size_t valid = ValidUtf8Prefix(text);
    Matches(text.substr(0, valid), [&](absl::string_view p, bool) { piece(p); });
    if (valid == text.size()) return;
    piece(text.substr(valid, 1));
    text.remove_prefix(valid + 1);
  }
}

void PreSplitter::Matches(absl::string_view text,
                          absl::FunctionRef<void(absl::string_view, bool matched)> piece) const {
  if (text.empty()) return;  // no match in nothing, not even an empty one (as the library)
  MatchScratch& scratch = Scratch();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t position = 0;  // where the next search starts
  size_t emitted = 0;   // the text before this is given out
  std::optional<size_t> last_end;
  // One character on from `at` (past the end at the end).
  const auto next_character = [&](size_t at) {
    return at < text.size() ? at + std::max<size_t>(1, Utf8CharLength(text.substr(at)))
                            : text.size() + 1;
  };
  while (position <= text.size()) {
    const int rc = Match(code_->code, subject, text.size(), position, scratch);
    if (rc == PCRE2_ERROR_NOMATCH) break;  // the rest is a stretch
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.data);
    const size_t start = ovector[0], end = ovector[1];
    if (start == end && last_end == end) {  // empty, right where the last match ended
      position = next_character(position);
      continue;
    }
    if (start > emitted) piece(text.substr(emitted, start - emitted), false);
    piece(text.substr(start, end - start), true);
    emitted = end;
    last_end = end;
    position = start == end ? next_character(end) : end;
  }
  if (emitted < text.size()) piece(text.substr(emitted), false);
}

}  // namespace tokenizer
}  // namespace shardwise
