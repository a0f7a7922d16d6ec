#include "tokenizer/huggingface/pattern.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/printable_text.h"
#include "tokenizer/huggingface/json_fields.h"
#include "tokenizer/huggingface/unicode_text.h"

namespace shardwise {
namespace tokenizer {
namespace hf {

absl::StatusOr<Pattern> Pattern::FromJson(const nlohmann::json& json, const std::string& path) {
  if (json.is_object() && json.size() == 1 && json.contains("String") &&
      json["String"].is_string()) {
    return Literal(json["String"].get<std::string>());
  }
  if (json.is_object() && json.size() == 1 && json.contains("Regex") && json["Regex"].is_string()) {
    auto regex = PreSplitter::Create(json["Regex"].get<std::string>(), PatternDialect::kOniguruma);
    if (!regex.ok()) return JsonError(path + ".Regex", regex.status().message());
    Pattern pattern;
    pattern.regex_ = std::make_shared<const PreSplitter>(std::move(*regex));
    return pattern;
  }
  return JsonError(path, absl::StrCat("is ", ShownJson(json),
                                      ", not a pattern ({\"String\": ...} or {\"Regex\": ...})"));
}

Pattern Pattern::Literal(std::string text) {
  Pattern pattern;
  pattern.literal_ = std::move(text);
  return pattern;
}

std::vector<Match> Pattern::Find(absl::string_view text) const {
  std::vector<Match> matches;
  if (regex_ != nullptr) {
    // An empty match is kept: Replace puts its content there.
    regex_->Matches(text, [&](absl::string_view piece, bool matched) {
      if (!piece.empty() || matched) matches.push_back({piece, matched});
    });
    return matches;
  }
  if (literal_.empty()) {
    if (!text.empty()) matches.push_back({text, false});
    return matches;
  }
  size_t position = 0;
  while (position < text.size()) {
    const size_t found = text.find(literal_, position);
    if (found == absl::string_view::npos) break;
    if (found > position) matches.push_back({text.substr(position, found - position), false});
    matches.push_back({text.substr(found, literal_.size()), true});
    position = found + literal_.size();
  }
  if (position < text.size()) matches.push_back({text.substr(position), false});
  return matches;
}

std::string Pattern::Replace(absl::string_view text, absl::string_view content) const {
  std::string out;
  for (const Match& match : Find(text)) {
    if (match.matched) {
      out.append(content.data(), content.size());
    } else {
      out.append(match.text.data(), match.text.size());
    }
  }
  return out;
}

std::vector<Match> FindCharacters(absl::string_view text,
                                  const std::function<bool(char32_t)>& predicate) {
  std::vector<Match> matches;
  size_t gap_start = 0, position = 0;
  ForEachCharacter(text, [&](char32_t c, absl::string_view bytes) {
    if (predicate(c)) {
      if (position > gap_start) {
        matches.push_back({text.substr(gap_start, position - gap_start), false});
      }
      matches.push_back({text.substr(position, bytes.size()), true});
      gap_start = position + bytes.size();
    }
    position += bytes.size();
  });
  if (position > gap_start) matches.push_back({text.substr(gap_start), false});
  return matches;
}

absl::StatusOr<SplitBehavior> SplitBehaviorFromJson(const nlohmann::json& json,
                                                    const std::string& path) {
  const std::string name = json.is_string() ? json.get<std::string>() : "";
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return JsonError(path, absl::StrCat("is ", ShownJson(json),
                                      ", not Removed, Isolated, MergedWithPrevious, "
                                      "MergedWithNext or Contiguous"));
}

namespace {

// Joins `b`, which follows `a` in the same text, onto `a`.
absl::string_view Joined(absl::string_view a, absl::string_view b) {
  return absl::string_view(a.data(), static_cast<size_t>(b.data() + b.size() - a.data()));
}

}  // namespace

// As the library's NormalizedString::split: a fold over the matches in order (in reverse
// for MergedWithNext), each piece marked a match or not only to tell the next what came
// before it.
std::vector<absl::string_view> SplitBy(std::vector<Match> matches, SplitBehavior behavior,
                                       bool invert) {
  if (invert) {
    for (Match& match : matches) match.matched = !match.matched;
  }
  std::vector<absl::string_view> pieces;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const Match& match : matches) {
        if (!match.matched) pieces.push_back(match.text);
      }
      break;
    case SplitBehavior::kIsolated:
      for (const Match& match : matches) pieces.push_back(match.text);
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Match& match : matches) {
        if (match.matched && !previous_match && !pieces.empty()) {
          pieces.back() = Joined(pieces.back(), match.text);
        } else {
          pieces.push_back(match.text);
        }
        previous_match = match.matched;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
        if (it->matched && !previous_match && !pieces.empty()) {
          pieces.back() = Joined(it->text, pieces.back());
        } else {
          pieces.push_back(it->text);
        }
        previous_match = it->matched;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
    case SplitBehavior::kContiguous:
      for (size_t i = 0; i < matches.size(); ++i) {
        if (i > 0 && matches[i].matched == previous_match) {
          pieces.back() = Joined(pieces.back(), matches[i].text);
        } else {
          pieces.push_back(matches[i].text);
        }
        previous_match = matches[i].matched;
      }
      break;
  }
  pieces.erase(std::remove_if(pieces.begin(), pieces.end(),
                              [](absl::string_view piece) { return piece.empty(); }),
               pieces.end());
  return pieces;
}

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise
