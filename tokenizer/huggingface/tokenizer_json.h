#ifndef SHARDWISE_TOKENIZER_HUGGINGFACE_TOKENIZER_JSON_H_
#define SHARDWISE_TOKENIZER_HUGGINGFACE_TOKENIZER_JSON_H_

// tokenizer.json read in one pass. Nearly all of a file's bytes are its BPE model's
// vocabulary and merges (Gemma 3's: 262,144 tokens and 514,906 merges of its 33 MB), and a
// JSON document object per token and per merge cost more than the reading itself (in
// nlohmann's DOM: a map node per token, a heap string and an array per merge; 1.3 s of
// Gemma 3's parse and free, against 0.14 s to read its text). So those two are kept as
// flat lists, everything else as a document (nlohmann::json) for the components' readers.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace shardwise {
namespace tokenizer {
namespace hf {

// One element of model.merges as the file gives it.
struct MergeEntry {
  enum class Form {
    kText,   // "a b": in `left` whole (the model splits it, and says what is wrong with it)
    kPair,   // ["a", "b"]
    kOther,  // anything else, in `other` as the file has it (for the model's error)
  };
  Form form = Form::kText;
  std::string left, right;
  nlohmann::json other;
};

// model.vocab's members: (token, id as given) in the file's order.
using VocabEntries = std::vector<std::pair<std::string, nlohmann::json>>;

// model.vocab's members and model.merges.
struct ModelLists {
  std::optional<VocabEntries> vocab;              // if an object
  std::optional<std::vector<MergeEntry>> merges;  // if an array
};

struct TokenizerJson {
  nlohmann::json document;  // the file, but for model.vocab and model.merges when listed
  ModelLists model;
};

// `text` (the file `name`) read: INVALID_ARGUMENT naming it when it is not one JSON object
// or nests deeper than 64 levels. A key given twice in one object takes its later value,
// as nlohmann's parse does (a vocabulary's token given twice is the model's to judge).
absl::StatusOr<TokenizerJson> ReadTokenizerJson(absl::string_view text, const std::string& name);

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_HUGGINGFACE_TOKENIZER_JSON_H_
