#ifndef SHARDWISE_TOKENIZER_HUGGINGFACE_PIECE_H_
#define SHARDWISE_TOKENIZER_HUGGINGFACE_PIECE_H_

// A text on its way through a tokenizer.json's normalizer and pre-tokenizer, and what the
// `tokenizers` library knows of where it came from, reduced to the one question its
// components ask: Metaspace's prepend_scheme "first" prepends to a piece only where the
// piece's offset in the input is 0.
//
// The library aligns each byte of a normalised text with the input's bytes it was made
// from (NormalizedString's alignments) and gives a piece cut from it the offset its first
// byte is aligned with. Each of its transformations keeps the alignments in the input's
// order, so the bytes aligned with the input's first byte are a prefix of the text:
// `lead` counts them. A stretch that begins the input starts with its first character's
// bytes as the lead; one after an added token has none. Each component says, where it
// makes or moves text, which of its bytes stay in the lead (normalizers.cc,
// pre_tokenizers.cc), as the library aligns them.

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace shardwise {
namespace tokenizer {
namespace hf {

struct Piece {
  std::string text;
  size_t lead = 0;  // leading bytes of `text` aligned with the input's first byte

  // Whether the library gives this piece offset 0 in the input.
  bool BeginsInput() const { return lead > 0; }
};

// A stretch of the input as the library first aligns it: when it begins the input, its
// first character's bytes are the lead.
Piece StretchPiece(absl::string_view stretch, bool begins_input);

// The piece of `whole` that `part` (a view into whole.text) is: it keeps the part of the
// lead it holds.
Piece Slice(const Piece& whole, absl::string_view part);
std::vector<Piece> Slices(const Piece& whole, const std::vector<absl::string_view>& parts);

// The lead of `respell(text)` where `respell` maps each character on its own (whatever
// it makes of a character is aligned with that character): respell of the lead.
template <typename Respell>
size_t LeadAfterRespelling(const Piece& piece, Respell respell) {
  if (piece.lead == 0) return 0;
  return respell(absl::string_view(piece.text).substr(0, piece.lead)).size();
}

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_HUGGINGFACE_PIECE_H_
