#include "tokenizer/huggingface/piece.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace shardwise {
namespace tokenizer {
namespace hf {

Piece StretchPiece(absl::string_view stretch, bool begins_input) {
  Piece piece{std::string(stretch), 0};
  if (begins_input && !stretch.empty()) {
    piece.lead = std::min(stretch.size(), std::max<size_t>(1, Utf8CharLength(stretch)));
  }
  return piece;
}

Piece Slice(const Piece& whole, absl::string_view part) {
  const size_t offset = static_cast<size_t>(part.data() - whole.text.data());
  const size_t lead = whole.lead > offset ? std::min(whole.lead - offset, part.size()) : 0;
  return {std::string(part), lead};
}

std::vector<Piece> Slices(const Piece& whole, const std::vector<absl::string_view>& parts) {
  std::vector<Piece> slices;
  slices.reserve(parts.size());
  for (const absl::string_view part : parts) slices.push_back(Slice(whole, part));
  return slices;
}

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise
