#include "worker/data/tokens.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "contracts/token_files.h"

namespace shardwise {
namespace {

int64_t Load(const char* p, int element) {
  switch (element) {
    case 2: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case 4: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    default: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
}

}  // namespace

int64_t SequenceStart(uint64_t seed, int64_t index, int64_t num_tokens, int64_t block_size) {
  uint64_t z = seed + (static_cast<uint64_t>(index) + 1) * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<int64_t>(z % static_cast<uint64_t>(num_tokens - block_size));
}

absl::StatusOr<std::unique_ptr<TokenFile>> TokenFile::Open(const std::string& field,
                                                           const std::string& path,
                                                           v1::TokenData::Format format,
                                                           const TokenModel& model, Links links) {
  ASSIGN_OR_RETURN(UntrustedFile opened, OpenTokenFile(field, path, links));
  ASSIGN_OR_RETURN(const TokenFileLayout layout, TokenFileLayoutOf(field, path, format, opened));
  if (layout.count < model.block_size + 1) {
    return TokenFileInvalid(
        field, path,
        absl::StrCat("holds ", layout.count, " tokens; a sequence of ", model.field, ".block_size ",
                     model.block_size, " needs at least ", model.block_size + 1));
  }
  std::unique_ptr<TokenFile> file(new TokenFile(field, path, std::move(opened), layout.offset,
                                                layout.element, layout.count, model));
  // Every id, a chunk at a time, checked and taken into the fingerprint.
  constexpr int64_t kChunk = int64_t{1} << 20;
  std::vector<int64_t> ids;
  uint64_t fingerprint = kEmptyFingerprint;
  for (int64_t first = 0; first < file->size(); first += kChunk) {
    RETURN_IF_ERROR(file->ReadIds(first, std::min(kChunk, file->size() - first), &ids, ""));
    fingerprint = FingerprintIds(fingerprint, ids.data(), ids.size());
  }
  file->fingerprint_ = fingerprint;
  return file;
}

absl::Status TokenFile::Read(int64_t first, int64_t count, std::vector<int64_t>* ids) const {
  return ReadIds(first, count, ids, " (the file changed since the job opened it)");
}

absl::Status TokenFile::ReadIds(int64_t first, int64_t count, std::vector<int64_t>* ids,
                                const char* when) const {
  std::vector<char> raw(static_cast<size_t>(count * element_));
  const uint64_t at = offset_ + static_cast<uint64_t>(first) * element_;
  const absl::StatusOr<uint64_t> done = file_.ReadUpTo(at, raw.size(), raw.data());
  if (!done.ok()) {
    // This host's trouble (UNAVAILABLE) stays the attempt's: not damage to the file.
    return absl::Status(
        absl::IsUnavailable(done.status()) ? done.status().code() : absl::StatusCode::kDataLoss,
        absl::StrCat("job.", field_, " reading tokens ", first, " to ", first + count, ": ",
                     done.status().message()));
  }
  if (*done < raw.size()) {
    return absl::DataLossError(
        absl::StrCat("job.", field_, " '", path_, "' was cut short while the job read it: token ",
                     first + static_cast<int64_t>(*done) / element_, " is gone (it held ", count_,
                     " tokens when it was opened)"));
  }
  ids->resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) (*ids)[i] = Load(raw.data() + i * element_, element_);
  return CheckIds(first, *ids, when);
}

absl::Status TokenFile::CheckIds(int64_t first, const std::vector<int64_t>& ids,
                                 const char* when) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= 0 && ids[i] < model_.vocab_size) continue;
    const int64_t index = first + static_cast<int64_t>(i);
    return TokenFileInvalid(
        field_, path_,
        absl::StrCat("token ", index, " (byte offset ", offset_ + index * element_, ") is ", ids[i],
                     ", not an id below ", model_.field, ".vocab_size ", model_.vocab_size, when));
  }
  return absl::OkStatus();
}

absl::StatusOr<MicroBatch> TokenMicroBatch(const TokenFile& file, uint64_t seed, int64_t first,
                                           int64_t count, int64_t block_size) {
  MicroBatch batch;
  batch.sequences = count;
  batch.sequence_length = block_size;
  batch.rows = count * block_size;
  batch.tokens.reserve(batch.rows);
  batch.labels.reserve(batch.rows);
  std::vector<int64_t> sequence;
  for (int64_t j = 0; j < count; ++j) {
    const int64_t start = SequenceStart(seed, first + j, file.size(), block_size);
    RETURN_IF_ERROR(file.Read(start, block_size + 1, &sequence));
    batch.tokens.insert(batch.tokens.end(), sequence.begin(), sequence.end() - 1);
    batch.labels.insert(batch.labels.end(), sequence.begin() + 1, sequence.end());
  }
  return batch;
}

}  // namespace shardwise
