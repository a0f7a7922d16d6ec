#include "tokenizer/byte_pair_encoder.h"

#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"

namespace shardwise {
namespace tokenizer {

absl::StatusOr<BytePairEncoder> BytePairEncoder::Create(const std::vector<BpeToken>& tokens) {
  BytePairEncoder encoder;
  int32_t largest = -1;
  for (const BpeToken& token : tokens) {
    if (token.id < 0 || token.id > kMaxTokenId) {
      return absl::InvalidArgumentError(
          absl::StrCat("id ", token.id, " is not in 0..", kMaxTokenId));
    }
    largest = std::max(largest, token.id);
  }
  encoder.bytes_of_id_.resize(largest + 1);
  encoder.has_id_.assign(largest + 1, false);
  encoder.tokens_.reserve(tokens.size());
  for (const BpeToken& token : tokens) {
    if (encoder.has_id_[token.id]) {
      return absl::InvalidArgumentError(absl::StrCat("two tokens have id ", token.id));
    }
    encoder.has_id_[token.id] = true;
    encoder.bytes_of_id_[token.id] = token.bytes;
    if (!encoder.tokens_.emplace(token.bytes, Entry{token.id, token.priority}).second) {
      return absl::InvalidArgumentError(absl::StrCat("two tokens have the bytes of id ", token.id));
    }
  }
  for (int byte = 0; byte < 256; ++byte) {
    if (!encoder.tokens_.contains(std::string(1, static_cast<char>(byte)))) {
      return absl::InvalidArgumentError(
          absl::StrCat("the vocabulary has no token for the byte ", byte));
    }
  }
  return encoder;
}

const std::string* BytePairEncoder::Bytes(int32_t id) const {
  if (id < 0 || id >= size() || !has_id_[id]) return nullptr;
  return &bytes_of_id_[id];
}

void BytePairEncoder::Encode(absl::string_view piece, std::vector<int32_t>* ids) const {
  if (piece.empty()) return;
  auto whole = tokens_.find(piece);
  if (whole != tokens_.end()) {
    ids->push_back(whole->second.id);
    return;
  }
  Merge(piece, ids);
}

// Symbols are byte ranges [start, end_[start]); a candidate pair is the symbol at `left`
// and the one at `middle`, valid while both still end where they did when it was pushed.
void BytePairEncoder::Merge(absl::string_view piece, std::vector<int32_t>* ids) const {
  const int n = static_cast<int>(piece.size());
  std::vector<int> end(n), previous(n);
  std::vector<bool> alive(n, true);
  for (int i = 0; i < n; ++i) {
    end[i] = i + 1;
    previous[i] = i - 1;
  }
  struct Candidate {
    int32_t priority;
    int left, middle, right_end;
    bool operator>(const Candidate& other) const {
      return std::make_pair(priority, left) > std::make_pair(other.priority, other.left);
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](int left) {
    if (left < 0) return;
    const int middle = end[left];
    if (middle >= n) return;
    auto token = tokens_.find(piece.substr(left, end[middle] - left));
    if (token != tokens_.end()) heap.push({token->second.priority, left, middle, end[middle]});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Candidate best = heap.top();
    heap.pop();
    if (!alive[best.left] || !alive[best.middle] || end[best.left] != best.middle ||
        end[best.middle] != best.right_end) {
      continue;  // one of its symbols merged since
    }
    alive[best.middle] = false;
    end[best.left] = best.right_end;
    if (best.right_end < n) previous[best.right_end] = best.left;
    push(previous[best.left]);
    push(best.left);
  }
  for (int start = 0; start < n; start = end[start]) {
    ids->push_back(tokens_.find(piece.substr(start, end[start] - start))->second.id);
  }
}

}  // namespace tokenizer
}  // namespace shardwise
