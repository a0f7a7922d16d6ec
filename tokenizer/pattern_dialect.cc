#include "tokenizer/pattern_dialect.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace shardwise {
namespace tokenizer {
namespace {

// The members of the classes, as a PCRE2 class's body. White_Space (Unicode's PropList):
// U+0009-000D, 0020, 0085, 00A0, 1680, 2000-200A, 2028, 2029, 202F, 205F, 3000.
constexpr absl::string_view kSpace =
    "\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";
constexpr absl::string_view kOnigurumaWord = "\\p{L}\\p{M}\\p{Nd}\\p{Pc}";
constexpr absl::string_view kHexDigit = "0-9A-Fa-f";

// The class body an escape letter stands for in `dialect`, or empty when PCRE2 reads the
// escape as the dialect does.
absl::string_view ClassBody(char letter, PatternDialect dialect) {
  switch (absl::ascii_tolower(static_cast<unsigned char>(letter))) {
    case 's':
      return kSpace;
    case 'w':
      return dialect == PatternDialect::kOniguruma ? kOnigurumaWord : absl::string_view();
    case 'h':
      return dialect == PatternDialect::kOniguruma ? kHexDigit : absl::string_view();
    default:
      return absl::string_view();
  }
}

// Oniguruma's word boundary \b (and \B, none) outside a class, between its word
// characters and others, as lookarounds: PCRE2's \b reads its own \w, without marks.
// Inside a class \b is a backspace in both engines.
std::string OnigurumaBoundary(bool negated) {
  const std::string word = absl::StrCat("[", kOnigurumaWord, "]");
  return negated ? absl::StrCat("(?:(?<=", word, ")(?=", word, ")|(?<!", word, ")(?!", word, "))")
                 : absl::StrCat("(?:(?<=", word, ")(?!", word, ")|(?<!", word, ")(?=", word, "))");
}

absl::Status Refuse(absl::string_view what, size_t offset) {
  return absl::InvalidArgumentError(
      absl::StrCat("the pattern's ", what, " at byte ", offset,
                   " is not supported (PCRE2 runs it here, and would read it otherwise)"));
}

// A group's opening at `pattern[i]` == '(' that only PCRE2 reads: its name, or empty.
absl::string_view Pcre2OnlyGroup(absl::string_view pattern, size_t i) {
  const absl::string_view rest = pattern.substr(i + 1);
  if (absl::StartsWith(rest, "*")) return "verb (*...)";
  if (!absl::StartsWith(rest, "?") || rest.size() < 2) return absl::string_view();
  const char kind = rest[1];
  const bool signed_number = (kind == '+' || kind == '-') && rest.size() > 2 &&
                             absl::ascii_isdigit(static_cast<unsigned char>(rest[2]));
  if (kind == 'R' || absl::ascii_isdigit(static_cast<unsigned char>(kind)) || signed_number ||
      kind == '&' || absl::StartsWith(rest, "?P>")) {
    return "recursion";
  }
  if (kind == 'C') return "callout (?C...)";
  return absl::string_view();
}

}  // namespace

absl::StatusOr<std::string> PatternForPcre2(absl::string_view pattern, PatternDialect dialect) {
  std::string out;
  out.reserve(pattern.size());
  bool in_class = false;
  size_t class_start = 0;  // where the class's members begin (after `[` or `[^`)
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char letter = pattern[++i];
      const absl::string_view body = ClassBody(letter, dialect);
      const bool negated = absl::ascii_isupper(static_cast<unsigned char>(letter));
      if (!in_class && dialect == PatternDialect::kOniguruma &&
          absl::ascii_tolower(static_cast<unsigned char>(letter)) == 'b') {
        absl::StrAppend(&out, OnigurumaBoundary(negated));
      } else if (body.empty()) {
        absl::StrAppend(&out, "\\", absl::string_view(&letter, 1));
      } else if (!in_class) {
        absl::StrAppend(&out, negated ? "[^" : "[", body, "]");
      } else if (negated) {
        return Refuse(absl::StrCat("\\", absl::string_view(&letter, 1), " inside a class"), i - 1);
      } else {
        absl::StrAppend(&out, body);
      }
      continue;
    }
    if (in_class) {
      if (c == ']' && i > class_start) in_class = false;
      if (c == '&' && i + 1 < pattern.size() && pattern[i + 1] == '&') {
        return Refuse("class intersection &&", i);
      }
      if (c == '[' && !absl::StartsWith(pattern.substr(i + 1), ":")) {
        return Refuse("class nested in a class", i);
      }
      if (c == '[') {  // a POSIX class, [:alpha:], copied whole
        const size_t end = pattern.find(":]", i + 2);
        if (end == absl::string_view::npos) return Refuse("unclosed [:", i);
        absl::StrAppend(&out, pattern.substr(i, end + 2 - i));
        i = end + 1;
        continue;
      }
    } else if (c == '[') {
      in_class = true;
      class_start = i + 1;
      if (class_start < pattern.size() && pattern[class_start] == '^') ++class_start;
    } else if (c == '(') {
      if (const absl::string_view what = Pcre2OnlyGroup(pattern, i); !what.empty()) {
        return Refuse(what, i);
      }
    }
    out += c;
  }
  return out;
}

}  // namespace tokenizer
}  // namespace shardwise
