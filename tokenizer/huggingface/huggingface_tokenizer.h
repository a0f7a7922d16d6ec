#ifndef SHARDWISE_TOKENIZER_HUGGINGFACE_HUGGINGFACE_TOKENIZER_H_
#define SHARDWISE_TOKENIZER_HUGGINGFACE_HUGGINGFACE_TOKENIZER_H_

// A tokenizer as Hugging Face ships one: its `tokenizers` library's tokenizer.json, the
// file beside most models on the Hub (Llama 3, Qwen3, Gemma 3, Mistral, DeepSeek V3, ...).
// Encoding is the library's, step by step:
//   1. added tokens matched in the raw text (those not `normalized`), their ids taken;
//   2. each stretch between them normalised ("normalizer"), and the `normalized` added
//      tokens matched in it;
//   3. each stretch left cut into pieces ("pre_tokenizer");
//   4. each piece encoded by the model (BPE: bpe_model.h).
// Decoding maps ids to tokens (an added token's content) and runs the "decoder".
// A document in a token file gets the ids the "post_processor" puts around a single
// sequence (TemplateProcessing's special tokens; BERT's and RoBERTa's cls and sep).
// Unlike the other kinds, special tokens' text in the text *is* matched (as the library
// does, whatever add_special_tokens says: that only adds the post-processor's ids).
// Text that is not valid UTF-8 is read with U+FFFD for each invalid byte.
// A component it does not support is refused naming its JSON path and type; it is never
// tokenized otherwise.
//
// Thread-safety: const methods may be called from several threads.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/huggingface/added_tokens.h"
#include "tokenizer/huggingface/bpe_model.h"
#include "tokenizer/huggingface/decoders.h"
#include "tokenizer/huggingface/normalizers.h"
#include "tokenizer/huggingface/pre_tokenizers.h"
#include "tokenizer/tokenizer.h"

namespace shardwise {
namespace tokenizer {

class HuggingFaceTokenizer final : public Tokenizer {
 public:
  // The tokenizer of tokenizer.json's `text`; `name` names the file in errors.
  static absl::StatusOr<std::unique_ptr<HuggingFaceTokenizer>> FromJson(absl::string_view text,
                                                                        const std::string& name);

  void Encode(std::string_view text, bool document_start, std::vector<int32_t>* ids) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  std::vector<int32_t> DocumentPrefix() const override { return prefix_; }
  std::vector<int32_t> DocumentSuffix() const override { return suffix_; }
  // An added token's content; a model's token when the post-processor puts it around a
  // document.
  std::optional<std::string> SpecialTokenText(int32_t id) const override;
  bool KeepsIdsAtCuts() const override { return keeps_ids_at_cuts_; }
  // The id of the token `text` names: an added token's content, else the model's token.
  std::optional<int32_t> TokenId(absl::string_view text) const;

 private:
  HuggingFaceTokenizer() = default;
  absl::Status ReadPostProcessor(const nlohmann::json& json, const std::string& path);
  // Steps 2 to 4 of a stretch between raw added tokens.
  void EncodeStretch(absl::string_view stretch, bool at_start, std::vector<int32_t>* ids) const;
  void EncodePieces(hf::Piece piece, std::vector<int32_t>* ids) const;

  hf::AddedTokens added_;
  std::unique_ptr<hf::Normalizer> normalizer_;
  std::unique_ptr<hf::PreTokenizer> pre_tokenizer_;
  std::unique_ptr<hf::BpeModel> model_;
  std::unique_ptr<hf::Decoder> decoder_;
  std::vector<int32_t> prefix_, suffix_;
  int64_t vocab_size_ = 0;
  bool keeps_ids_at_cuts_ = false;  // decided at load (cut_safety.h)
};

}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_HUGGINGFACE_HUGGINGFACE_TOKENIZER_H_
