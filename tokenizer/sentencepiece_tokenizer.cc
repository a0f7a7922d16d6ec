#include "tokenizer/sentencepiece_tokenizer.h"

#include "absl/strings/str_cat.h"
#include "common/printable_text.h"
#include "tokenizer/manifest.h"
#include "tokenizer/sentencepiece_model_check.h"

namespace shardwise {
namespace tokenizer {

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::Load(
    const std::string& path) {
  auto bytes = ReadFileBytes(path);
  if (!bytes.ok()) return bytes.status();
  return FromSerialized(*bytes, path);
}

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::FromSerialized(
    const std::string& serialized, const std::string& name) {
  // The library trusts the model's normaliser; a corrupt one would crash this program.
  if (absl::Status safe = CheckSentencePieceModel(serialized, name); !safe.ok()) return safe;
  std::string error;
  auto model = spm::Model::Load(serialized, &error);
  if (model == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": not a SentencePiece model (", ShownValue(error), ")"));
  }
  return std::unique_ptr<SentencePieceTokenizer>(new SentencePieceTokenizer(std::move(model)));
}

// Line by line (at the places CanCutAt allows, so the ids are the same): the library's
// BPE is twice as fast on lines as on a megabyte at once.
void SentencePieceTokenizer::Encode(std::string_view text, bool document_start,
                                    std::vector<int32_t>* ids) const {
  ForEachCutPiece(text, [&](std::string_view piece, bool first) {
    model_->Encode(piece, document_start && first, ids);
  });
}

std::string SentencePieceTokenizer::Decode(const std::vector<int32_t>& ids) const {
  return model_->Decode(ids);
}

std::vector<int32_t> SentencePieceTokenizer::DocumentPrefix() const {
  if (model_->bos_id() < 0) return {};
  return {model_->bos_id()};
}

std::vector<int32_t> SentencePieceTokenizer::DocumentSuffix() const {
  if (model_->eos_id() < 0) return {};
  return {model_->eos_id()};
}

std::optional<std::string> SentencePieceTokenizer::SpecialTokenText(int32_t id) const {
  if (!model_->IsSpecial(id)) return std::nullopt;
  return model_->IdToPiece(id);
}

namespace {

// Llama 2's trainer settings (its tokenizer.model's trainer_spec): BPE over 32,000
// pieces, digits split, bytes for what the pieces do not cover, no normalisation, and
// whitespace kept as it is so that decoding gives the text back.
std::map<std::string, std::string> Llama2Options() {
  return {{"model_type", "bpe"},
          {"vocab_size", "32000"},
          {"character_coverage", "0.99995"},
          {"byte_fallback", "true"},
          {"split_digits", "true"},
          {"allow_whitespace_only_pieces", "true"},
          {"normalization_rule_name", "identity"},
          {"remove_extra_whitespaces", "false"},
          {"add_dummy_prefix", "true"},
          {"max_sentence_length", "4192"},
          {"input_sentence_size", "200000000"},
          {"shuffle_input_sentence", "true"},
          {"unk_id", "0"},
          {"bos_id", "1"},
          {"eos_id", "2"},
          {"pad_id", "-1"},
          {"minloglevel", "1"}};  // the trainer's warnings, not its progress
}

}  // namespace

absl::StatusOr<std::map<std::string, std::string>> TrainerOptions(
    const SentencePieceTraining& training) {
  std::map<std::string, std::string> options = Llama2Options();
  if (training.preset == "small") {
    // Llama 2's, sized for a corpus of megabytes: every character covered.
    options["vocab_size"] = "4096";
    options["character_coverage"] = "1.0";
    options["input_sentence_size"] = "1000000";
  } else if (training.preset != "llama2") {
    return absl::InvalidArgumentError(absl::StrCat("sentencepiece preset \"", training.preset,
                                                   "\" is unknown; known: small, llama2"));
  }
  if (!training.model_type.empty()) {
    if (training.model_type != "bpe" && training.model_type != "unigram") {
      return absl::InvalidArgumentError(
          absl::StrCat("model_type \"", training.model_type, "\" is unknown; known: bpe, unigram"));
    }
    options["model_type"] = training.model_type;
  }
  if (training.vocab_size < 0 || (training.vocab_size > 0 && training.vocab_size < 260)) {
    return absl::InvalidArgumentError(absl::StrCat("vocab_size ", training.vocab_size,
                                                   " is too small: at least 260 (256 bytes and the "
                                                   "unknown, BOS and EOS pieces)"));
  }
  if (training.vocab_size > 0) options["vocab_size"] = absl::StrCat(training.vocab_size);
  if (training.character_coverage != 0) {
    if (training.character_coverage < 0.9 || training.character_coverage > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("character_coverage ", training.character_coverage, " is outside [0.9, 1]"));
    }
    options["character_coverage"] = absl::StrCat(training.character_coverage);
  }
  if (!training.byte_fallback.empty()) {
    if (training.byte_fallback != "true" && training.byte_fallback != "false") {
      return absl::InvalidArgumentError(
          absl::StrCat("byte_fallback \"", training.byte_fallback, "\" is not true or false"));
    }
    options["byte_fallback"] = training.byte_fallback;
  }
  if (training.input_sentences > 0) {
    options["input_sentence_size"] = absl::StrCat(training.input_sentences);
  }
  if (training.threads > 0) options["num_threads"] = absl::StrCat(training.threads);
  return options;
}

absl::StatusOr<std::string> TrainSentencePiece(const SentencePieceTraining& training,
                                               const std::vector<std::string>& inputs) {
  auto options = TrainerOptions(training);
  if (!options.ok()) return options.status();
  std::string model;
  const std::string error = spm::Train(*options, inputs, &model);
  if (!error.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("training the SentencePiece model: ", ShownValue(error)));
  }
  return model;
}

}  // namespace tokenizer
}  // namespace shardwise
