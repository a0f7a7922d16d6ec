#ifndef SHARDWISE_TOKENIZER_TOKENIZER_H_
#define SHARDWISE_TOKENIZER_TOKENIZER_H_

// What every tokenizer kind gives `shardwise tokenize` and `shardwise sample`: text to ids
// and back. Kinds: bytes (byte_tokenizer.h), byte-level BPE from GPT-2's or tiktoken's
// vocabulary files (byte_level_bpe.h), SentencePiece models (sentencepiece_tokenizer.h).
// LoadTokenizer (load.h) makes one from the folder `shardwise tokenize` writes.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardwise {
namespace tokenizer {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Appends the ids of `text` to `ids`. `document_start`: `text` begins a document
  // (SentencePiece's dummy prefix goes there only). A document cut after a newline that
  // is followed by an ASCII letter (CanCutAt) encodes, piece by piece, to the ids it
  // encodes to whole: the corpus tokenizer relies on it to stream and to use every core.
  // Special tokens' text ("<|endoftext|>") in `text` is ordinary text: only
  // DocumentPrefix/Suffix put special ids in a corpus.
  virtual void Encode(std::string_view text, bool document_start,
                      std::vector<int32_t>* ids) const = 0;

  // The text of `ids` (the inverse of Encode on a whole document); special ids print as
  // their names, ids outside the vocabulary as "<id>".
  virtual std::string Decode(const std::vector<int32_t>& ids) const = 0;

  // One more than the largest id Encode or a document's prefix and suffix can give.
  virtual int64_t vocab_size() const = 0;

  // The ids written before and after each document of a corpus (GPT-2's <|endoftext|>
  // after it; SentencePiece's BOS before and EOS after, where the model has them).
  virtual std::vector<int32_t> DocumentPrefix() const = 0;
  virtual std::vector<int32_t> DocumentSuffix() const = 0;

  // The text a special id stands for in the kind's own files ("<|endoftext|>", "<s>", an
  // added token's content): how Hugging Face's tokenizer_config.json names the BOS and EOS
  // tokens. nullopt for an id that is no special token of the vocabulary.
  virtual std::optional<std::string> SpecialTokenText(int32_t id) const = 0;

  // Whether a document cut where CanCutAt allows encodes to the ids of the whole (the
  // promise above): every kind but a tokenizer.json whose components act at the cut
  // (huggingface/cut_safety.h). The corpus cuts a document only where this holds.
  virtual bool KeepsIdsAtCuts() const { return true; }
};

// Whether the code point that ends `text` is whitespace (ASCII, or one of Unicode's
// White_Space characters: U+0085, U+00A0, U+1680, U+2000-200A, U+2028-2029, U+202F,
// U+205F, U+3000), read back from its UTF-8 bytes.
inline bool EndsInWhitespace(std::string_view text) {
  if (text.empty()) return false;
  const auto byte = [&](size_t from_end) {
    return static_cast<unsigned char>(text[text.size() - from_end]);
  };
  const unsigned char last = byte(1);
  if (last < 0x80) return last == ' ' || (last >= '\t' && last <= '\r');
  if (text.size() >= 2 && byte(2) == 0xC2) return last == 0x85 || last == 0xA0;
  if (text.size() < 3) return false;
  const unsigned lead = byte(3), middle = byte(2);
  if (lead == 0xE1) return middle == 0x9A && last == 0x80;  // U+1680
  if (lead == 0xE3) return middle == 0x80 && last == 0x80;  // U+3000
  if (lead != 0xE2) return false;
  if (middle == 0x80) return last <= 0x8A || last == 0xA8 || last == 0xA9 || last == 0xAF;
  return middle == 0x81 && last == 0x9F;  // U+205F
}

// Whether a document may be cut into pieces encoded apart just before `text[i]`: after a
// newline that follows no other whitespace, before an ASCII letter. Every pre-split
// pattern here ends a piece at such a newline and begins the next at the letter, and the
// newline is its own piece whole or cut. (After whitespace it is not: GPT-2's pattern
// makes "\n\nB" the pieces "\n", "\n", "B" but a text ending in "\n\n" the piece "\n\n".)
// SentencePiece's pieces never hold a newline.
inline bool CanCutAt(std::string_view text, size_t i) {
  if (i == 0 || i >= text.size() || text[i - 1] != '\n') return false;
  const char c = text[i];
  if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return false;
  return !EndsInWhitespace(text.substr(0, i - 1));
}

// Calls `piece(text_of_piece, is_first)` for each piece of `text` cut at every place
// CanCutAt allows, in order; together the pieces are `text`.
template <typename PieceFunction>
void ForEachCutPiece(std::string_view text, PieceFunction&& piece) {
  size_t start = 0;
  for (size_t i = 1; i <= text.size(); ++i) {
    if (i == text.size() || CanCutAt(text, i)) {
      piece(text.substr(start, i - start), start == 0);
      start = i;
    }
  }
}

}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_TOKENIZER_H_
