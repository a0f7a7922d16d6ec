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
};

// Whether a document may be cut into pieces encoded apart just before `text[i]`: after a
// newline, before an ASCII letter. Every pre-split pattern here ends a piece at such a
// newline and begins the next at the letter; SentencePiece's pieces never hold a newline.
inline bool CanCutAt(std::string_view text, size_t i) {
  if (i == 0 || i >= text.size() || text[i - 1] != '\n') return false;
  const char c = text[i];
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
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
