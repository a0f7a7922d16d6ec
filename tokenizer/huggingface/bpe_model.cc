#include "tokenizer/huggingface/bpe_model.h"

#include <atomic>
#include <queue>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "tokenizer/huggingface/json_fields.h"
#include "tokenizer/huggingface/unicode_text.h"

namespace shardwise {
namespace tokenizer {
namespace hf {
namespace {

// The ids of recent pieces, per thread and model: most pieces of a text are words seen
// before. Cleared when full or when another model uses the thread. Only short pieces are
// kept, as the library keeps them: without a pre-tokenizer (Llama 2's tokenizer.json) a
// piece is a whole document, and keeping those would hold the corpus in memory.
class PieceCache {
 public:
  static constexpr size_t kMaxPieceBytes = 256;
  const std::vector<int32_t>* Find(uint64_t owner, absl::string_view piece) {
    if (owner != owner_) {
      ids_.clear();
      owner_ = owner;
    }
    if (piece.size() >= kMaxPieceBytes) return nullptr;
    auto it = ids_.find(piece);
    return it == ids_.end() ? nullptr : &it->second;
  }
  void Add(absl::string_view piece, std::vector<int32_t> ids) {
    if (piece.size() >= kMaxPieceBytes) return;
    if (ids_.size() >= kCapacity) ids_.clear();
    ids_[piece] = std::move(ids);
  }

 private:
  static constexpr size_t kCapacity = 1 << 16;
  uint64_t owner_ = 0;
  absl::flat_hash_map<std::string, std::vector<int32_t>> ids_;
};

PieceCache& ThreadCache() {
  thread_local PieceCache cache;
  return cache;
}

}  // namespace

uint64_t BpeModel::NewKey() {
  static std::atomic<uint64_t> models{0};
  return ++models;
}

absl::StatusOr<BpeModel> BpeModel::FromJson(const nlohmann::json& json, ModelLists lists,
                                            const std::string& path) {
  BpeModel model;
  if (const nlohmann::json* dropout = Field(json, "dropout");
      dropout != nullptr && !(dropout->is_number() && dropout->get<double>() == 0)) {
    return JsonError(path + ".dropout",
                     absl::StrCat("is ", ShownJson(*dropout),
                                  ": BPE dropout samples its merges, and encoding here is "
                                  "deterministic"));
  }
  if (!lists.vocab.has_value()) {
    return JsonError(path + ".vocab", "is not an object of tokens to ids");
  }
  HF_RETURN_IF_ERROR(model.ReadVocab(*std::move(lists.vocab), path + ".vocab"));
  HF_ASSIGN_OR_RETURN(model.continuing_subword_prefix_,
                      StringField(json, "continuing_subword_prefix", path, ""));
  HF_ASSIGN_OR_RETURN(model.end_of_word_suffix_, StringField(json, "end_of_word_suffix", path, ""));
  HF_ASSIGN_OR_RETURN(model.fuse_unk_, BoolField(json, "fuse_unk", path, false));
  HF_ASSIGN_OR_RETURN(model.byte_fallback_, BoolField(json, "byte_fallback", path, false));
  model.falls_back_on_every_byte_ = model.byte_fallback_;
  for (int byte = 0; byte < 256 && model.falls_back_on_every_byte_; ++byte) {
    model.falls_back_on_every_byte_ = model.vocab_.contains(absl::StrFormat("<0x%02X>", byte));
  }
  HF_ASSIGN_OR_RETURN(model.ignore_merges_, BoolField(json, "ignore_merges", path, false));
  if (const nlohmann::json* unk = Field(json, "unk_token"); unk != nullptr) {
    HF_ASSIGN_OR_RETURN(const std::string unk_token, StringField(json, "unk_token", path, ""));
    const auto it = model.vocab_.find(unk_token);
    if (it == model.vocab_.end()) {
      return JsonError(path + ".unk_token",
                       absl::StrCat("\"", ShownValue(unk_token), "\" is not in the vocabulary"));
    }
    model.unk_id_ = it->second;
  }
  if (!lists.merges.has_value()) return JsonError(path + ".merges", "is not an array of merges");
  HF_RETURN_IF_ERROR(model.ReadMerges(*lists.merges, path + ".merges"));
  return model;
}

absl::Status BpeModel::ReadVocab(VocabEntries&& vocab, const std::string& path) {
  if (vocab.size() > static_cast<size_t>(INT32_MAX)) {
    return JsonError(path, "holds more than 2^31 - 1 tokens");
  }
  // A token given twice keeps its later id, as the library's map does: only each token's
  // last entry counts, found first (its index in vocab_ until its id replaces it), and its
  // earlier ones are not read at all.
  vocab_.reserve(vocab.size());
  for (size_t i = 0; i < vocab.size(); ++i) vocab_[vocab[i].first] = static_cast<int32_t>(i);
  token_of_id_.reserve(vocab_.size());
  has_id_.reserve(vocab_.size());
  for (size_t i = 0; i < vocab.size(); ++i) {
    auto& [token, id_json] = vocab[i];
    const auto entry = vocab_.find(token);
    if (entry->second != static_cast<int32_t>(i)) continue;  // a later entry gives it
    const std::optional<int32_t> id = IntIn(id_json, kMaxTokenId);
    if (!id.has_value()) {  // the error, with the token's path, made only here
      return IdValue(id_json, absl::StrCat(path, "[\"", ShownValue(token), "\"]")).status();
    }
    if (*id >= static_cast<int32_t>(token_of_id_.size())) {
      token_of_id_.resize(*id + 1);
      has_id_.resize(*id + 1);
    }
    // Two tokens of one id: which one the id decodes to, and whether a cut keeps the ids
    // (cut_safety.h looks at each id's token), would be the file's accident. The library
    // keeps either one, by its map's order.
    if (has_id_[*id]) {
      return JsonError(
          absl::StrCat(path, "[\"", ShownValue(token), "\"]"),
          absl::StrCat("is ", *id, ", the id of \"", ShownValue(token_of_id_[*id]), "\" too"));
    }
    entry->second = *id;
    token_of_id_[*id] = std::move(token);
    has_id_[*id] = true;
  }
  return absl::OkStatus();
}

absl::Status BpeModel::ReadMerges(const std::vector<MergeEntry>& merges, const std::string& path) {
  merges_.reserve(merges.size());
  int32_t rank = 0;
  std::string result;  // one buffer for every merge's result: half a million of them
  for (const MergeEntry& merge : merges) {
    const auto where = [&] { return absl::StrCat(path, "[", rank, "]"); };
    absl::string_view left = merge.left, right = merge.right;
    if (merge.form == MergeEntry::Form::kText) {  // "a b"
      const absl::string_view text = merge.left;
      // merges.txt's header line, which files converted from one keep: the library drops
      // it, uncounted in the ranks.
      if (absl::StartsWith(text, "#version")) continue;
      const size_t space = text.find(' ');
      if (space == absl::string_view::npos ||
          text.find(' ', space + 1) != absl::string_view::npos) {
        return JsonError(where(), absl::StrCat("is \"", ShownValue(text),
                                               "\", not two tokens separated by a space"));
      }
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (merge.form == MergeEntry::Form::kOther) {
      return JsonError(where(), absl::StrCat("is ", ShownJson(merge.other), ", not a merge"));
    }
    // With a subword prefix, the right token's prefix is not in the result: "h" and "##e"
    // merge to "he", as the library builds its merges.
    const bool prefixed =
        !continuing_subword_prefix_.empty() && absl::StartsWith(right, continuing_subword_prefix_);
    result.assign(left.data(), left.size());
    absl::StrAppend(&result, prefixed ? right.substr(continuing_subword_prefix_.size()) : right);
    const auto a = vocab_.find(left), b = vocab_.find(right), ab = vocab_.find(result);
    if (a == vocab_.end() || b == vocab_.end() || ab == vocab_.end()) {
      return JsonError(where(),
                       absl::StrCat("merges \"", ShownValue(left), "\" and \"", ShownValue(right),
                                    "\", whose tokens or result the vocabulary lacks"));
    }
    // A pair listed twice takes its later rank, as the library's map of merges does.
    merges_[PairKey(a->second, b->second)] = Merge{rank, ab->second};
    ++rank;
  }
  return absl::OkStatus();
}

const std::string* BpeModel::Token(int32_t id) const {
  if (id < 0 || id >= size() || !has_id_[id]) return nullptr;
  return &token_of_id_[id];
}

std::optional<int32_t> BpeModel::Id(absl::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

std::vector<int32_t> BpeModel::Characters(absl::string_view piece) const {
  std::vector<int32_t> symbols;
  std::optional<int32_t> unk;  // a run of unknown characters, fused or not
  const auto flush_unk = [&] {
    if (unk.has_value()) symbols.push_back(*unk);
    unk.reset();
  };
  size_t position = 0;
  ForEachCharacter(piece, [&](char32_t, absl::string_view bytes) {
    std::string token(bytes);
    if (position > 0) token = continuing_subword_prefix_ + token;
    if (position + bytes.size() == piece.size()) token += end_of_word_suffix_;
    position += bytes.size();
    if (const auto it = vocab_.find(token); it != vocab_.end()) {
      flush_unk();
      symbols.push_back(it->second);
      return;
    }
    if (byte_fallback_) {
      std::vector<int32_t> byte_ids;
      for (const char byte : token) {
        const auto it = vocab_.find(absl::StrFormat("<0x%02X>", static_cast<uint8_t>(byte)));
        if (it == vocab_.end()) break;
        byte_ids.push_back(it->second);
      }
      if (byte_ids.size() == token.size()) {
        symbols.insert(symbols.end(), byte_ids.begin(), byte_ids.end());
        return;
      }
    }
    if (!unk_id_.has_value()) return;  // no token at all: the character is dropped
    if (!(unk.has_value() && fuse_unk_)) flush_unk();
    unk = *unk_id_;
  });
  flush_unk();
  return symbols;
}

// The library's Word::merge_all: a queue of the pairs that merge, lowest rank first and
// the leftmost of equals; an entry whose pair has changed since it was queued is passed.
void BpeModel::MergeAll(std::vector<int32_t>* symbols) const {
  struct Candidate {
    int32_t rank;
    int32_t position;
    int32_t result;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : position > other.position;
    }
  };
  std::vector<int32_t>& ids = *symbols;
  const int32_t n = static_cast<int32_t>(ids.size());
  std::vector<int32_t> next(n), previous(n);
  std::vector<bool> alive(n, true);
  for (int32_t i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? i + 1 : -1;
    previous[i] = i - 1;
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto consider = [&](int32_t left) {
    if (left < 0 || next[left] < 0) return;
    const auto merge = merges_.find(PairKey(ids[left], ids[next[left]]));
    if (merge != merges_.end()) queue.push({merge->second.rank, left, merge->second.result});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    if (!alive[top.position] || next[top.position] < 0) continue;
    const int32_t right = next[top.position];
    const auto merge = merges_.find(PairKey(ids[top.position], ids[right]));
    if (merge == merges_.end() || merge->second.result != top.result) continue;  // stale
    ids[top.position] = top.result;
    alive[right] = false;
    next[top.position] = next[right];
    if (next[right] >= 0) previous[next[right]] = top.position;
    consider(previous[top.position]);
    consider(top.position);
  }
  std::vector<int32_t> merged;
  for (int32_t i = 0; i < n; ++i) {
    if (alive[i]) merged.push_back(ids[i]);
  }
  ids = std::move(merged);
}

void BpeModel::Encode(absl::string_view piece, std::vector<int32_t>* ids) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    if (const auto whole = vocab_.find(piece); whole != vocab_.end()) {
      ids->push_back(whole->second);
      return;
    }
  }
  PieceCache& cache = ThreadCache();
  if (const std::vector<int32_t>* known = cache.Find(key_, piece)) {
    ids->insert(ids->end(), known->begin(), known->end());
    return;
  }
  std::vector<int32_t> symbols = Characters(piece);
  MergeAll(&symbols);
  ids->insert(ids->end(), symbols.begin(), symbols.end());
  cache.Add(piece, std::move(symbols));
}

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise
