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
// Oniguruma's Word (its make_unicode_property_data.py): Alphabetic, which holds the
// letters, letter numbers (U+216B) and other alphabetics (circled letters, U+24B6),
// Mark, Decimal_Number and Connector_Punctuation.
constexpr absl::string_view kOnigurumaWord = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}";
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

// An interval quantifier `{n}`, `{n,}`, `{,m}` or `{n,m}` at `pattern[i]` == '{': where it
// ends (its '}'), or npos where the brace is a literal (in both engines).
struct Interval {
  size_t end = absl::string_view::npos;
  bool has_comma = false;
  bool low_omitted = false;  // `{,m}`: Oniguruma's `{0,m}`, PCRE2 10.42's literal text
};
Interval ReadInterval(absl::string_view pattern, size_t i) {
  Interval interval;
  size_t j = i + 1, digits = 0;
  interval.low_omitted = j < pattern.size() && pattern[j] == ',';
  for (; j < pattern.size(); ++j) {
    const char c = pattern[j];
    if (absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      ++digits;
    } else if (c == ',' && !interval.has_comma) {
      interval.has_comma = true;
    } else {
      break;
    }
  }
  if (j < pattern.size() && pattern[j] == '}' && digits > 0) interval.end = j;
  return interval;
}

// Oniguruma's reading of an interval at `pattern[i]` as PCRE2 reads it, appended to
// `out`, or a refusal: Oniguruma (Ruby's syntax, which Hugging Face's library uses) has
// no possessive interval, and repeats `X{n,m}+` as `(?:X{n,m})+`, and makes `X{n}?`
// optional, `(?:X{n})?`, where PCRE2 reads a possessive interval and X{n}; neither has a
// rewrite without finding X's start.
absl::Status AppendInterval(absl::string_view pattern, size_t i, const Interval& interval,
                            std::string* out) {
  const char next = interval.end + 1 < pattern.size() ? pattern[interval.end + 1] : '\0';
  if (next == '+') {
    return Refuse(
        "interval followed by + (Oniguruma repeats the interval, PCRE2 makes it "
        "possessive: write (?:...{n,m})+)",
        i);
  }
  if (next == '?' && !interval.has_comma) {
    return Refuse(
        "{n}? (Oniguruma makes the repetition optional, PCRE2 reads {n}: write "
        "(?:...{n})?)",
        i);
  }
  const size_t from = interval.low_omitted ? i + 1 : i;  // `{,m}` written `{0,m}`
  absl::StrAppend(out, interval.low_omitted ? "{0" : "",
                  pattern.substr(from, interval.end + 1 - from));
  return absl::OkStatus();
}

// An option group `(?imx-imx)` or `(?imx-imx:` at `pattern[i]` == '(', as Oniguruma's
// Ruby syntax reads its letters, in PCRE2's: `m` makes `.` match a newline (PCRE2's `s`);
// another letter (`s`, PCRE2's `U`, `n`, `J`) is none of its options (Hugging Face's
// library refuses the pattern), and refused. Appends the group's
// opening to `out` and returns where it ends; npos when `pattern[i]` opens no option group.
absl::StatusOr<size_t> AppendOptionGroup(absl::string_view pattern, size_t i, std::string* out) {
  if (i + 2 >= pattern.size() || pattern[i + 1] != '?') return absl::string_view::npos;
  size_t j = i + 2;
  std::string letters;
  for (; j < pattern.size() &&
         (absl::ascii_isalpha(static_cast<unsigned char>(pattern[j])) || pattern[j] == '-');
       ++j) {
    letters += pattern[j];
  }
  if (letters.empty() || j >= pattern.size() || (pattern[j] != ')' && pattern[j] != ':')) {
    return absl::string_view::npos;
  }
  for (char& letter : letters) {
    if (letter != 'i' && letter != 'm' && letter != 'x' && letter != '-') {
      return Refuse(
          absl::StrCat("option (?", absl::string_view(&letter, 1), "), none of Oniguruma's,"), i);
    }
    if (letter == 'm') letter = 's';
  }
  absl::StrAppend(out, "(?", letters, absl::string_view(&pattern[j], 1));
  return j;
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
        // An escape's braces (\x{20}, \o{17}, \p{L}) are its own, never an interval.
        if (absl::ascii_isalpha(static_cast<unsigned char>(letter)) && i + 1 < pattern.size() &&
            pattern[i + 1] == '{') {
          const size_t close = pattern.find('}', i + 1);
          const size_t end = close == absl::string_view::npos ? pattern.size() - 1 : close;
          absl::StrAppend(&out, pattern.substr(i + 1, end - i));
          i = end;
        }
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
      if (dialect == PatternDialect::kOniguruma) {
        const absl::StatusOr<size_t> end = AppendOptionGroup(pattern, i, &out);
        if (!end.ok()) return end.status();
        if (*end != absl::string_view::npos) {
          i = *end;
          continue;
        }
      }
    } else if (c == '{' && dialect == PatternDialect::kOniguruma) {
      if (const Interval interval = ReadInterval(pattern, i);
          interval.end != absl::string_view::npos) {
        if (absl::Status appended = AppendInterval(pattern, i, interval, &out); !appended.ok()) {
          return appended;
        }
        i = interval.end;
        continue;
      }
    }
    out += c;
  }
  return out;
}

}  // namespace tokenizer
}  // namespace shardwise
