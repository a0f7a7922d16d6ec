#ifndef SHARDWISE_TOKENIZER_SENTENCEPIECE_TOKENIZER_H_
#define SHARDWISE_TOKENIZER_SENTENCEPIECE_TOKENIZER_H_

// SentencePiece models (Llama 2's tokenizer.model, or one trained on the corpus), through
// Debian's libsentencepiece (sentencepiece_api.h).

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/sentencepiece_api.h"
#include "tokenizer/tokenizer.h"

namespace shardwise {
namespace tokenizer {

class SentencePieceTokenizer : public Tokenizer {
 public:
  // NOT_FOUND for a file that cannot be read, INVALID_ARGUMENT for one that is no model.
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> Load(const std::string& path);
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> FromSerialized(
      const std::string& serialized, const std::string& name);

  void Encode(std::string_view text, bool document_start, std::vector<int32_t>* ids) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return model_->vocab_size(); }
  std::vector<int32_t> DocumentPrefix() const override;
  std::vector<int32_t> DocumentSuffix() const override;
  // The piece of a control or unknown id ("<s>", "</s>", "<unk>").
  std::optional<std::string> SpecialTokenText(int32_t id) const override;
  int32_t unknown_id() const { return model_->unk_id(); }

 private:
  explicit SentencePieceTokenizer(std::unique_ptr<spm::Model> model) : model_(std::move(model)) {}
  std::unique_ptr<spm::Model> model_;
};

// How `shardwise tokenize` trains a model. The preset sets every trainer option; the
// fields set here (non-zero, non-empty) then override it.
struct SentencePieceTraining {
  std::string preset = "small";  // "small" or "llama2" (docs/job-spec.md lists both)
  std::string model_type;        // "bpe" or "unigram"
  int32_t vocab_size = 0;
  double character_coverage = 0;
  std::string byte_fallback;    // "true" or "false"
  int64_t input_sentences = 0;  // lines sampled for training (0: the preset's)
  int32_t threads = 0;
};

// The trainer's options for `training`; INVALID_ARGUMENT naming a field and its value.
absl::StatusOr<std::map<std::string, std::string>> TrainerOptions(
    const SentencePieceTraining& training);

// Trains on the lines of `inputs`; the model, serialized (a tokenizer.model file's bytes).
absl::StatusOr<std::string> TrainSentencePiece(const SentencePieceTraining& training,
                                               const std::vector<std::string>& inputs);

}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_SENTENCEPIECE_TOKENIZER_H_
