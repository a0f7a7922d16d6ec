#include "tokenizer/byte_level_bpe.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/printable_text.h"
#include "tokenizer/vocabulary_files.h"

namespace shardwise {
namespace tokenizer {
namespace {

// The ids of recent pieces, for each thread: most pieces of a text are words seen before.
// Cleared when full or when another encoder (its key) uses the thread.
class PieceCache {
 public:
  const std::vector<int32_t>* Find(uint64_t owner, absl::string_view piece) {
    if (owner != owner_) {
      ids_.clear();
      owner_ = owner;
    }
    auto it = ids_.find(piece);
    return it == ids_.end() ? nullptr : &it->second;
  }
  void Add(absl::string_view piece, const std::vector<int32_t>& ids) {
    if (ids_.size() >= kCapacity) ids_.clear();
    ids_.emplace(piece, ids);
  }

 private:
  static constexpr size_t kCapacity = 1 << 16;
  uint64_t owner_ = 0;
  absl::flat_hash_map<std::string, std::vector<int32_t>> ids_;
};

PieceCache& ThreadPieceCache() {
  thread_local PieceCache cache;
  return cache;
}

}  // namespace

ByteLevelBpe::ByteLevelBpe(Encoding encoding, BytePairEncoder encoder, PreSplitter splitter)
    : encoding_(std::move(encoding)), encoder_(std::move(encoder)), splitter_(std::move(splitter)) {
  static std::atomic<uint64_t> instances{0};
  cache_key_ = ++instances;
  vocab_size_ = std::max<int64_t>(encoding_.vocab_size, encoder_.size());
  for (const SpecialToken& special : encoding_.specials) {
    special_text_[special.id] = special.text;
    vocab_size_ = std::max<int64_t>(vocab_size_, special.id + 1);
  }
}

absl::StatusOr<std::unique_ptr<ByteLevelBpe>> ByteLevelBpe::FromTiktoken(
    const std::string& path, const std::string& encoding_name) {
  auto tokens = ReadTiktokenFile(path);
  if (!tokens.ok()) return tokens.status();
  return FromTiktokenRanks(*tokens, path, encoding_name);
}

absl::StatusOr<std::unique_ptr<ByteLevelBpe>> ByteLevelBpe::FromTiktokenRanks(
    const std::vector<BpeToken>& tokens, const std::string& name,
    const std::string& encoding_name) {
  const Encoding* encoding = FindEncoding(encoding_name);
  if (encoding == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown encoding \"", ShownValue(encoding_name),
                                                   "\"; known: ", EncodingNames()));
  }
  auto encoder = BytePairEncoder::Create(tokens);
  if (!encoder.ok())
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", encoder.status().message()));
  for (const SpecialToken& special : encoding->specials) {
    if (encoder->Bytes(special.id) != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": has a rank with id ", special.id, ", which is ", encoding_name,
                       "'s special token ", special.text, ": is it ", encoding_name, "'s file?"));
    }
  }
  auto splitter = PreSplitter::Create(encoding->pattern);
  if (!splitter.ok()) return splitter.status();
  return std::unique_ptr<ByteLevelBpe>(
      new ByteLevelBpe(*encoding, std::move(*encoder), std::move(*splitter)));
}

absl::StatusOr<std::unique_ptr<ByteLevelBpe>> ByteLevelBpe::FromGpt2Files(
    const std::string& encoder_json_path, const std::string& vocab_bpe_path) {
  auto vocabulary = ReadGpt2Files(encoder_json_path, vocab_bpe_path);
  if (!vocabulary.ok()) return vocabulary.status();
  return FromGpt2Vocabulary(*vocabulary, encoder_json_path);
}

absl::StatusOr<std::unique_ptr<ByteLevelBpe>> ByteLevelBpe::FromGpt2Vocabulary(
    const Gpt2Vocabulary& vocabulary, const std::string& name) {
  auto encoder = BytePairEncoder::Create(vocabulary.tokens);
  if (!encoder.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", encoder.status().message()));
  }
  Encoding encoding = *FindEncoding("gpt2");
  encoding.specials = vocabulary.specials;
  encoding.vocab_size = 0;
  encoding.after_document.clear();
  absl::flat_hash_map<int32_t, std::string> special_of_id;
  for (const SpecialToken& special : encoding.specials) {
    // A special token shares no id with a token or another special: the decoder would
    // write one for the other (an id of 65 is the byte "A").
    if (encoder->Bytes(special.id) != nullptr ||
        !special_of_id.emplace(special.id, special.text).second) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": the special token \"",
                                                     ShownValue(special.text), "\" has id ",
                                                     special.id, ", which another token has"));
    }
    if (special.text == "<|endoftext|>") encoding.after_document = {special.id};
  }
  auto splitter = PreSplitter::Create(encoding.pattern);
  if (!splitter.ok()) return splitter.status();
  return std::unique_ptr<ByteLevelBpe>(
      new ByteLevelBpe(std::move(encoding), std::move(*encoder), std::move(*splitter)));
}

void ByteLevelBpe::Encode(std::string_view text, bool /*document_start*/,
                          std::vector<int32_t>* ids) const {
  PieceCache& cache = ThreadPieceCache();
  splitter_.Split(absl::string_view(text.data(), text.size()), [&](absl::string_view piece) {
    if (const std::vector<int32_t>* known = cache.Find(cache_key_, piece)) {
      ids->insert(ids->end(), known->begin(), known->end());
      return;
    }
    std::vector<int32_t> piece_ids;
    encoder_.Encode(piece, &piece_ids);
    ids->insert(ids->end(), piece_ids.begin(), piece_ids.end());
    cache.Add(piece, piece_ids);
  });
}

std::optional<std::string> ByteLevelBpe::SpecialTokenText(int32_t id) const {
  auto special = special_text_.find(id);
  if (special == special_text_.end()) return std::nullopt;
  return special->second;
}

std::string ByteLevelBpe::Decode(const std::vector<int32_t>& ids) const {
  std::string text;
  for (int32_t id : ids) {
    if (const std::string* bytes = encoder_.Bytes(id)) {
      text += *bytes;
    } else if (auto special = special_text_.find(id); special != special_text_.end()) {
      text += special->second;
    } else {
      absl::StrAppend(&text, "<", id, ">");
    }
  }
  return text;
}

}  // namespace tokenizer
}  // namespace shardwise
