#include "tokenizer/huggingface/cut_safety.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace shardwise {
namespace tokenizer {
namespace hf {
namespace {

// Texts before and after a cut, where CanCutAt allows one: the left ends in a newline that
// follows no whitespace, the right begins with an ASCII letter.
constexpr absl::string_view kLefts[] = {"a\n",        "word\n", "x 1\n", "x.\n",
                                        "\xC3\xA9\n", "\n",     "a,\n"};
constexpr absl::string_view kRights[] = {"B", "b", "Bar baz", "the 1", "x\n"};

Piece Normalized(const Normalizer* normalizer, absl::string_view text, bool at_start) {
  Piece piece = StretchPiece(text, at_start);
  if (normalizer != nullptr) normalizer->Apply(&piece, at_start);
  return piece;
}

std::vector<Piece> PreTokenized(const PreTokenizer* pre_tokenizer, Piece piece) {
  std::vector<Piece> pieces = {std::move(piece)};
  if (pre_tokenizer != nullptr) pre_tokenizer->Apply(&pieces);
  return pieces;
}

std::string Joined(const std::vector<Piece>& pieces) {
  std::string text;
  for (const Piece& piece : pieces) text += piece.text;
  return text;
}

// Where pieces end, as offsets into their joined text.
std::vector<size_t> Ends(const std::vector<Piece>& pieces) {
  std::vector<size_t> ends;
  ends.reserve(pieces.size());
  size_t end = 0;
  for (const Piece& piece : pieces) ends.push_back(end += piece.text.size());
  return ends;
}

enum class ProbeResult { kChanged, kSplitAtCut, kJoinedAcrossCut };

// What cutting `left` + `right` between them does to the text the model sees.
ProbeResult Probe(const Normalizer* normalizer, const PreTokenizer* pre_tokenizer,
                  absl::string_view left, absl::string_view right, bool at_start) {
  const Piece whole = Normalized(normalizer, std::string(left) + std::string(right), at_start);
  const Piece left_normalized = Normalized(normalizer, left, at_start);
  const Piece right_normalized = Normalized(normalizer, right, /*at_start=*/false);
  if (whole.text != left_normalized.text + right_normalized.text) return ProbeResult::kChanged;
  const std::vector<Piece> together = PreTokenized(pre_tokenizer, whole);
  std::vector<Piece> apart = PreTokenized(pre_tokenizer, left_normalized);
  const size_t cut = Joined(apart).size();
  for (Piece& piece : PreTokenized(pre_tokenizer, right_normalized)) {
    apart.push_back(std::move(piece));
  }
  if (Joined(together) != Joined(apart)) return ProbeResult::kChanged;
  // Apart, the pieces end where together they do, and at the cut.
  std::vector<size_t> expected = Ends(together);
  bool split = false;
  for (size_t end : expected) split = split || end == cut;
  if (!split) expected.insert(std::lower_bound(expected.begin(), expected.end(), cut), cut);
  if (Ends(apart) != expected) return ProbeResult::kChanged;
  return split ? ProbeResult::kSplitAtCut : ProbeResult::kJoinedAcrossCut;
}

bool IsAsciiLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// A newline, as the model's tokens spell it (itself, or ByteLevel's "Ċ"), then a letter.
bool SpansACut(absl::string_view token) {
  for (size_t i = 0; i + 1 < token.size(); ++i) {
    if (token[i] == '\n' && IsAsciiLetter(token[i + 1])) return true;
    if (token.substr(i, 2) == "\xC4\x8A" && i + 2 < token.size() && IsAsciiLetter(token[i + 2])) {
      return true;
    }
  }
  return false;
}

// Whether added token `token` is matched where a cut falls as in the whole text. An
// lstrip token starting with a letter takes the newline before it, which a cut leaves on
// the other side; a single_word token ending in a newline is refused where a letter
// follows it, which a cut hides.
bool MatchedAlikeAtCuts(const AddedToken& token) {
  for (absl::string_view text :
       {absl::string_view(token.content), absl::string_view(token.matched)}) {
    if (text.empty()) continue;
    if (SpansACut(text)) return false;
    if (token.lstrip && IsAsciiLetter(text.front())) return false;
    if (token.single_word && text.back() == '\n') return false;
  }
  return true;
}

// Whether the model encodes a piece holding a cut as it encodes the piece's two sides.
bool ModelEncodesApart(const BpeModel& model) {
  // Marks, fused unknowns and a piece taken whole as a token (ignore_merges: "word\n" may
  // be one where "word\nBar" merges otherwise) depend on a piece's whole: a cut piece
  // would differ. Without them, no merge joins the two sides (its token would hold the
  // newline and the letter), so each side merges as it would alone.
  if (model.has_affixes() || model.fuses_unknown() || model.ignores_merges()) return false;
  for (int32_t id = 0; id < model.size(); ++id) {
    const std::string* token = model.Token(id);
    if (token != nullptr && SpansACut(*token)) return false;
  }
  return true;
}

}  // namespace

bool CutsKeepIds(const Normalizer* normalizer, const PreTokenizer* pre_tokenizer,
                 const BpeModel& model, const AddedTokens& added) {
  for (const AddedToken& token : added.tokens()) {
    if (!MatchedAlikeAtCuts(token)) return false;
  }
  bool joined = false;
  for (absl::string_view left : kLefts) {
    for (absl::string_view right : kRights) {
      for (bool at_start : {false, true}) {
        const ProbeResult result = Probe(normalizer, pre_tokenizer, left, right, at_start);
        if (result == ProbeResult::kChanged) return false;
        joined = joined || result == ProbeResult::kJoinedAcrossCut;
      }
    }
  }
  return !joined || ModelEncodesApart(model);
}

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise
