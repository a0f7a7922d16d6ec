#ifndef SHARDWISE_TOKENIZER_SENTENCEPIECE_API_H_
#define SHARDWISE_TOKENIZER_SENTENCEPIECE_API_H_

// The one door to Debian's libsentencepiece. Its headers define their own
// absl::string_view, which clashes with Abseil's, so this header and its .cc use only the
// standard library (errors are strings); sentencepiece_tokenizer.h wraps it in Abseil.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace shardwise {
namespace tokenizer {
namespace spm {

class Model {
 public:
  ~Model();
  // A serialized ModelProto (a tokenizer.model file's bytes). nullptr, with `error` set,
  // when the library refuses it.
  static std::unique_ptr<Model> Load(const std::string& serialized, std::string* error);

  // `dummy_prefix`: the model's own setting (add_dummy_prefix) applies; false encodes as
  // if the text continued a document, with no "▁" put before it.
  void Encode(std::string_view text, bool dummy_prefix, std::vector<int32_t>* ids) const;
  std::string Decode(const std::vector<int32_t>& ids) const;
  int vocab_size() const;
  int bos_id() const;  // -1 when the model has none
  int eos_id() const;
  int unk_id() const;
  // Whether `id` is a control or the unknown piece; its piece (any id of the vocabulary).
  bool IsSpecial(int id) const;
  std::string IdToPiece(int id) const;

 private:
  struct Processors;
  explicit Model(std::unique_ptr<Processors> processors);
  // The first id of a piece of text (not a control, unknown, byte or unused piece); -1
  // when the vocabulary has none.
  int OrdinaryPiece() const;
  std::unique_ptr<Processors> processors_;
};

// The serialized model with its normalizer's add_dummy_prefix set to false.
std::string WithoutDummyPrefix(const std::string& model);

// Trains a model on the lines of `input_paths` with SentencePiece's trainer options
// (`options`: its flag names without dashes, e.g. {"vocab_size", "8000"}). Returns ""
// and sets `serialized_model`, or the trainer's error.
std::string Train(const std::map<std::string, std::string>& options,
                  const std::vector<std::string>& input_paths, std::string* serialized_model);

}  // namespace spm
}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_SENTENCEPIECE_API_H_
