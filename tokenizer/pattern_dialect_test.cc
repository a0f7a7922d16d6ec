#include "tokenizer/pattern_dialect.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tokenizer/pre_split.h"

namespace shardwise {
namespace tokenizer {
namespace {

constexpr PatternDialect kOnig = PatternDialect::kOniguruma;

// The matched pieces of `text` under `pattern` read as `dialect`.
std::vector<std::string> MatchedPieces(const std::string& pattern, const std::string& text,
                                       PatternDialect dialect = kOnig) {
  auto splitter = PreSplitter::Create(pattern, dialect);
  EXPECT_TRUE(splitter.ok()) << splitter.status();
  std::vector<std::string> pieces;
  if (!splitter.ok()) return pieces;
  splitter->Matches(text, [&](absl::string_view piece, bool matched) {
    if (matched) pieces.emplace_back(piece);
  });
  return pieces;
}

std::string Refusal(const std::string& pattern, PatternDialect dialect = kOnig) {
  auto rewritten = PatternForPcre2(pattern, dialect);
  return rewritten.ok() ? "accepted: " + *rewritten : std::string(rewritten.status().message());
}

// U+180E (MONGOLIAN VOWEL SEPARATOR) left White_Space in Unicode 6.3; PCRE2 10.42 still
// counts it in \s. Oniguruma, Rust's regex and Python's `regex` do not.
TEST(PatternDialect, SpaceIsUnicodesWhiteSpaceInEveryDialect) {
  for (PatternDialect dialect : {PatternDialect::kTiktoken, kOnig}) {
    EXPECT_EQ(MatchedPieces("\\s+", "x \xE1\xA0\x8Ey", dialect), std::vector<std::string>{" "});
    EXPECT_EQ(MatchedPieces("\\S+", "x \xE1\xA0\x8Ey", dialect),
              (std::vector<std::string>{"x", "\xE1\xA0\x8Ey"}));
    EXPECT_EQ(MatchedPieces("[^\\s\\p{L}]+", "a\xC2\xA0-\xE1\xA0\x8E", dialect),
              std::vector<std::string>{"-\xE1\xA0\x8E"});
  }
  EXPECT_EQ(MatchedPieces("\\s+", "\t\n\x0B\x0C\r \xC2\x85\xE3\x80\x80"),
            std::vector<std::string>{"\t\n\x0B\x0C\r \xC2\x85\xE3\x80\x80"});
}

// Oniguruma's \w: alphabetics, marks, decimal digits, connector punctuation. PCRE2 10.42's
// has no marks and counts every number (superscript two is No). Alphabetic holds the
// letter numbers (roman numeral twelve, U+216B, is Nl) and circled letters (U+24B6, So).
TEST(PatternDialect, OnigurumasWordHasMarksAndOnlyDecimalDigits) {
  EXPECT_EQ(MatchedPieces("\\w+", "e\xCC\x81 x\xC2\xB2 a_1"),
            (std::vector<std::string>{"e\xCC\x81", "x", "a_1"}));
  EXPECT_EQ(MatchedPieces("\\w+", "\xE2\x85\xAB\xE2\x92\xB6 \xE2\x91\xA0"),
            std::vector<std::string>{"\xE2\x85\xAB\xE2\x92\xB6"});  // circled one is No
  EXPECT_EQ(MatchedPieces("[\\w-]+", "a-b\xCC\x81!"), std::vector<std::string>{"a-b\xCC\x81"});
  EXPECT_EQ(MatchedPieces("\\W+", "a, b"), std::vector<std::string>{", "});
}

// Oniguruma's \b is a boundary of its \w: none between a letter and its combining mark,
// where PCRE2's \b finds one. Inside a class it is a backspace, as in PCRE2.
TEST(PatternDialect, OnigurumasBoundaryIsOneOfItsWord) {
  EXPECT_EQ(MatchedPieces("e\\b", "e\xCC\x81 e!"), std::vector<std::string>{"e"});
  EXPECT_EQ(MatchedPieces("\\b\\w+\\b", "cafe\xCC\x81s, x"),
            (std::vector<std::string>{"cafe\xCC\x81s", "x"}));
  EXPECT_EQ(MatchedPieces("e\\B.", "e\xCC\x81 ex e!"),
            (std::vector<std::string>{"e\xCC\x81", "ex"}));
  EXPECT_EQ(MatchedPieces("[\\b]+", "a\b\bb"), std::vector<std::string>{"\b\b"});
  EXPECT_EQ(*PatternForPcre2("\\b", PatternDialect::kTiktoken), "\\b");  // not rewritten
}

// Oniguruma's \h is a hex digit; PCRE2's is horizontal space.
TEST(PatternDialect, OnigurumasHIsAHexDigit) {
  EXPECT_EQ(MatchedPieces("\\h+", "q1 qaF9g"), (std::vector<std::string>{"1", "aF9"}));
  EXPECT_EQ(MatchedPieces("\\H+", "1 g"), std::vector<std::string>{" g"});
  EXPECT_EQ(*PatternForPcre2("\\h", PatternDialect::kTiktoken), "\\h");  // not rewritten
}

TEST(PatternDialect, OtherEscapesAndClassesAreCopied) {
  for (const char* same : {"'s|'t| ?\\p{L}+| ?\\p{N}+", "[]a]", "[^]a]", "[[:alpha:]]+", "\\[\\s",
                           "(?i:'s)", "(?-i)x", "(?<name>a)\\k<name>", "\\x{2581}"}) {
    auto rewritten = PatternForPcre2(same, kOnig);
    ASSERT_TRUE(rewritten.ok()) << same << ": " << rewritten.status();
    if (std::string(same).find("\\s") == std::string::npos) {
      EXPECT_EQ(*rewritten, same);
    }
  }
  EXPECT_EQ(MatchedPieces("[]a]+", "a]b"), std::vector<std::string>{"a]"});
}

// PCRE2's own constructs, refused before they run: a verb may lower the match limits
// until a match fails, and a recursion may loop; the engines the patterns are written
// for refuse them at load.
TEST(PatternDialect, Pcre2sOwnConstructsAreRefusedWithTheirOffset) {
  EXPECT_EQ(Refusal("(*LIMIT_MATCH=1)(a|b)+c"),
            "the pattern's verb (*...) at byte 0 is not supported (PCRE2 runs it here, and would "
            "read it otherwise)");
  EXPECT_NE(Refusal("a(*SKIP)b").find("verb (*...) at byte 1 "), std::string::npos);
  for (const char* recursion :
       {"(?R)|x", "(a)(?1)", "(a)(?-1)", "(a)(?+1)", "(?<n>a)(?&n)", "(?P<n>a)(?P>n)"}) {
    EXPECT_NE(Refusal(recursion).find("the pattern's recursion at byte"), std::string::npos)
        << recursion;
  }
  EXPECT_NE(Refusal("(?C1)a").find("callout"), std::string::npos);
  EXPECT_EQ(PreSplitter::Create("(?R)|x", kOnig).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// What no rewrite keeps exact is refused, never run with another meaning.
TEST(PatternDialect, WhatCannotBeRewrittenExactlyIsRefused) {
  EXPECT_NE(Refusal("[\\Sa]").find("\\S inside a class at byte 1"), std::string::npos);
  EXPECT_NE(Refusal("[\\W]").find("\\W inside a class"), std::string::npos);
  EXPECT_NE(Refusal("[a[bc]]").find("class nested in a class at byte 2"), std::string::npos);
  EXPECT_NE(Refusal("[a-z&&[^aeiou]]").find("class intersection && at byte 4"), std::string::npos);
  EXPECT_NE(Refusal("[[:alpha]").find("unclosed [:"), std::string::npos);
}

// Oniguruma's intervals (Ruby's syntax, which Hugging Face's library compiles with): no
// possessive interval, `{n}?` optional, `{,m}` from 0. Intervals elsewhere, and braces
// that are no interval, read alike in both.
TEST(PatternDialect, OnigurumasIntervalsAreReadAsItReadsThem) {
  EXPECT_NE(Refusal("\\p{N}{1,3}+").find("interval followed by + (Oniguruma repeats the interval"),
            std::string::npos);
  EXPECT_NE(Refusal("a{2}?").find("{n}? (Oniguruma makes the repetition optional"),
            std::string::npos);
  EXPECT_EQ(MatchedPieces("\\p{N}{,2}x", "123x"), std::vector<std::string>{"23x"});
  EXPECT_EQ(*PatternForPcre2("a{,2}", kOnig), "a{0,2}");
  EXPECT_EQ(MatchedPieces("\\p{N}{1,3}", "12345"), (std::vector<std::string>{"123", "45"}));
  EXPECT_EQ(MatchedPieces("a{1,2}?", "aa"), (std::vector<std::string>{"a", "a"}));  // lazy in both
  EXPECT_EQ(MatchedPieces("a{x}", "a{x}"), std::vector<std::string>{"a{x}"});       // no interval
  EXPECT_EQ(*PatternForPcre2("a{1,3}+", PatternDialect::kTiktoken), "a{1,3}+");  // possessive there
  // An escape's braces are no interval.
  EXPECT_EQ(MatchedPieces("\\x{20}+", "a  b"), std::vector<std::string>{"  "});
  EXPECT_EQ(*PatternForPcre2("\\x{3000}?\\p{L}{2}", kOnig), "\\x{3000}?\\p{L}{2}");
}

// Oniguruma's `(?m)` is PCRE2's `(?s)`: `.` matches a newline (`^` and `$` match at every
// line in both already); its `(?s)` is no option, refused as the library refuses it.
TEST(PatternDialect, OnigurumasOptionMIsDotAll) {
  EXPECT_EQ(MatchedPieces("(?m).+", "a\nb"), std::vector<std::string>{"a\nb"});
  EXPECT_EQ(MatchedPieces("(?im:A.)+", "a\nb"), std::vector<std::string>{"a\n"});
  EXPECT_EQ(MatchedPieces(".+", "a\nb"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*PatternForPcre2("(?i-m)a", kOnig), "(?i-s)a");
  EXPECT_NE(Refusal("(?s).").find("option (?s), none of Oniguruma's, at byte 0"),
            std::string::npos);
  EXPECT_NE(Refusal("a(?U)b+").find("option (?U), none of Oniguruma's, at byte 1"),
            std::string::npos);
  EXPECT_EQ(*PatternForPcre2("(?:a)(?=b)(?<n>c)", kOnig), "(?:a)(?=b)(?<n>c)");
  EXPECT_EQ(*PatternForPcre2("(?m).", PatternDialect::kTiktoken), "(?m).");
}

}  // namespace
}  // namespace tokenizer
}  // namespace shardwise
