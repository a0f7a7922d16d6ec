#include "tokenizer/sentencepiece_model_check.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace shardwise {
namespace tokenizer {
namespace {

// ModelProto's and NormalizerSpec's field numbers (sentencepiece_model.proto).
constexpr uint32_t kNormalizerSpecField = 3;
constexpr uint32_t kDenormalizerSpecField = 5;
constexpr uint32_t kPrecompiledCharsmapField = 2;

// NFKC's rules, the largest SentencePiece ships, make a trie of about 100 KB.
constexpr uint32_t kMaxTrieBytes = uint32_t{4} << 20;

// Protobuf's wire format, as far as finding length-delimited fields needs.
class WireReader {
 public:
  explicit WireReader(absl::string_view bytes) : rest_(bytes) {}
  bool done() const { return rest_.empty(); }

  // The next field's number and, for a length-delimited one, its bytes in `*value`;
  // false on a malformed field (a varint past the end, a length past the end, a group or
  // an unknown wire type).
  bool Next(uint32_t* field, bool* delimited, absl::string_view* value) {
    uint64_t key = 0;
    if (!Varint(&key) || (key >> 3) == 0 || (key >> 3) > UINT32_MAX) return false;
    *field = static_cast<uint32_t>(key >> 3);
    *delimited = false;
    uint64_t length = 0;
    switch (key & 7) {
      case 0:
        return Varint(&length);
      case 1:
        return Skip(8);
      case 5:
        return Skip(4);
      case 2:
        if (!Varint(&length) || length > rest_.size()) return false;
        *delimited = true;
        *value = rest_.substr(0, length);
        rest_.remove_prefix(length);
        return true;
      default:
        return false;
    }
  }

 private:
  bool Varint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (rest_.empty()) return false;
      const uint8_t byte = static_cast<uint8_t>(rest_[0]);
      rest_.remove_prefix(1);
      *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }
  bool Skip(size_t n) {
    if (rest_.size() < n) return false;
    rest_.remove_prefix(n);
    return true;
  }
  absl::string_view rest_;
};

// A darts-clone unit, as the library decodes it.
struct Unit {
  uint32_t bits;
  bool has_leaf() const { return (bits >> 8) & 1; }
  uint32_t value() const { return bits & ((1u << 31) - 1); }
  uint32_t label() const { return bits & ((1u << 31) | 0xff); }
  uint32_t offset() const { return (bits >> 10) << ((bits & (1u << 9)) >> 6); }
};

class TrieCheck {
 public:
  TrieCheck(absl::string_view trie, absl::string_view strings)
      : units_(trie.size() / 4), strings_(strings) {
    // little-endian, as written; an empty trie copies nothing (memcpy may not see null)
    if (!units_.empty()) std::memcpy(units_.data(), trie.data(), units_.size() * 4);
  }

  // Every node the library can reach from the root, as commonPrefixSearch walks: at a
  // node whose children start at `base`, byte c reads unit base ^ c; when its label is c,
  // the walk goes on at base ^ c ^ offset, and a leaf there holds an offset into the
  // strings.
  absl::Status Run() {
    if (units_.empty()) return absl::InvalidArgumentError("its trie is empty");
    std::vector<bool> visited(units_.size());
    std::vector<uint32_t> bases = {units_[0].offset()};
    while (!bases.empty()) {
      const uint32_t base = bases.back();
      bases.pop_back();
      if ((static_cast<uint64_t>(base) | 0xff) >= units_.size()) {
        return absl::InvalidArgumentError(absl::StrCat("its trie reads past its ", units_.size(),
                                                       " units (a node at ", base, ")"));
      }
      if (visited[base]) continue;
      visited[base] = true;
      for (uint32_t c = 0; c < 256; ++c) {
        const Unit unit = units_[base ^ c];
        if (unit.label() != c) continue;
        const uint32_t next = base ^ c ^ unit.offset();
        if (unit.has_leaf()) {
          if (absl::Status leaf = CheckLeaf(next); !leaf.ok()) return leaf;
        }
        bases.push_back(next);
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status CheckLeaf(uint32_t at) const {
    if (at >= units_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("a leaf of its trie lies past its ", units_.size(), " units"));
    }
    const uint32_t value = units_[at].value();
    if (value >= strings_.size() || strings_.find('\0', value) == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("a leaf of its trie names byte ", value, " of its ", strings_.size(),
                       " bytes of normalised strings, where no string ends"));
    }
    return absl::OkStatus();
  }

  std::vector<Unit> units_;
  absl::string_view strings_;
};

// The last precompiled_charsmap of every occurrence of the spec field `spec_field` (as
// protobuf merges them), or empty; false when the wire format is broken.
bool FindCharsmap(absl::string_view model, uint32_t spec_field, absl::string_view* charsmap) {
  WireReader top(model);
  while (!top.done()) {
    uint32_t field = 0;
    bool delimited = false;
    absl::string_view value;
    if (!top.Next(&field, &delimited, &value)) return false;
    if (field != spec_field || !delimited) continue;
    WireReader spec(value);
    while (!spec.done()) {
      absl::string_view inner;
      if (!spec.Next(&field, &delimited, &inner)) return false;
      if (field == kPrecompiledCharsmapField && delimited) *charsmap = inner;
    }
  }
  return true;
}

}  // namespace

absl::Status CheckPrecompiledCharsmap(absl::string_view blob) {
  // <trie size: 4 bytes, little-endian><trie><normalised strings>, as the library splits it.
  if (blob.size() < 4) return absl::InvalidArgumentError("it is shorter than its 4-byte size");
  uint32_t trie_size = 0;
  for (int i = 3; i >= 0; --i) trie_size = trie_size << 8 | static_cast<uint8_t>(blob[i]);
  if (trie_size > blob.size() - 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("its trie of ", trie_size, " bytes exceeds its ", blob.size(), " bytes"));
  }
  // The walk visits each node with all 256 bytes: a bound on the trie bounds its time.
  if (trie_size > kMaxTrieBytes) {
    return absl::InvalidArgumentError(absl::StrCat("its trie of ", trie_size, " bytes is over the ",
                                                   kMaxTrieBytes,
                                                   " bytes of any rule set SentencePiece makes"));
  }
  return TrieCheck(blob.substr(4, trie_size), blob.substr(4 + trie_size)).Run();
}

absl::string_view FindNormalizerCharsmap(absl::string_view model) {
  absl::string_view charsmap;
  return FindCharsmap(model, kNormalizerSpecField, &charsmap) ? charsmap : absl::string_view();
}

absl::Status CheckSentencePieceModel(absl::string_view model, const std::string& name) {
  for (const auto& [field, spec_name] :
       {std::pair<uint32_t, const char*>{kNormalizerSpecField, "normalizer_spec"},
        {kDenormalizerSpecField, "denormalizer_spec"}}) {
    absl::string_view charsmap;
    if (!FindCharsmap(model, field, &charsmap)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": not a SentencePiece model (its protobuf encoding is broken)"));
    }
    if (charsmap.empty()) continue;
    if (absl::Status checked = CheckPrecompiledCharsmap(charsmap); !checked.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": its ", spec_name, ".precompiled_charsmap is corrupt: ", checked.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace tokenizer
}  // namespace shardwise
