#include "worker/data/data_identity.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace shardwise {
namespace {

// One file's part of an identity, as CheckEveryRankReadTheSameData compares it.
struct FileIdentity {
  const char* field;  // the spec's, for the message
  int64_t count;
  uint64_t fingerprint;
};

std::vector<FileIdentity> Files(const v1::JobSpec& spec, const DataIdentity& identity) {
  if (spec.data().has_tokens()) {
    return {{"data.tokens.train_path", identity.train_count, identity.train_fingerprint},
            {"data.tokens.val_path", identity.validation_count, identity.validation_fingerprint}};
  }
  return {{spec.data().has_synthetic() ? "data.synthetic" : "data.safetensors_path",
           identity.train_count, identity.train_fingerprint}};
}

// How `rank`'s `theirs` differs from rank 0's `ours`, or "" where it does not.
std::string Difference(const v1::JobSpec& spec, const FileIdentity& ours,
                       const FileIdentity& theirs, int rank) {
  const char* unit = spec.data().has_tokens() ? "tokens" : "samples";
  if (ours.count != theirs.count) {
    return absl::StrCat(ours.field, " holds ", ours.count, " ", unit, " on rank 0 and ",
                        theirs.count, " on rank ", rank);
  }
  if (ours.fingerprint != theirs.fingerprint) {
    return absl::StrFormat(
        "%s holds %d %s on rank 0 and on rank %d, but not the same ones (fingerprints "
        "%016x and %016x)",
        ours.field, ours.count, unit, rank, ours.fingerprint, theirs.fingerprint);
  }
  return "";
}

}  // namespace

std::array<int64_t, DataIdentity::kPackedSize> DataIdentity::Pack() const {
  return {train_count, validation_count, static_cast<int64_t>(train_fingerprint),
          static_cast<int64_t>(validation_fingerprint)};
}

DataIdentity DataIdentity::Unpack(const int64_t* packed) {
  DataIdentity identity;
  identity.train_count = packed[0];
  identity.validation_count = packed[1];
  identity.train_fingerprint = static_cast<uint64_t>(packed[2]);
  identity.validation_fingerprint = static_cast<uint64_t>(packed[3]);
  return identity;
}

bool DataIdentity::operator==(const DataIdentity& other) const { return Pack() == other.Pack(); }

uint64_t FingerprintIds(uint64_t fingerprint, const int64_t* ids, size_t count) {
  constexpr uint64_t kPrime = 0x100000001b3ULL;
  for (size_t i = 0; i < count; ++i) {
    fingerprint = (fingerprint ^ static_cast<uint64_t>(ids[i])) * kPrime;
  }
  return fingerprint;
}

absl::Status CheckEveryRankReadTheSameData(const v1::JobSpec& spec,
                                           const std::vector<DataIdentity>& by_rank) {
  if (by_rank.empty()) return absl::OkStatus();
  const std::vector<FileIdentity> ours = Files(spec, by_rank[0]);
  for (size_t rank = 1; rank < by_rank.size(); ++rank) {
    const std::vector<FileIdentity> theirs = Files(spec, by_rank[rank]);
    for (size_t file = 0; file < ours.size(); ++file) {
      const std::string difference =
          Difference(spec, ours[file], theirs[file], static_cast<int>(rank));
      if (difference.empty()) continue;
      return absl::FailedPreconditionError(absl::StrCat(
          "the ranks opened different data: ", difference,
          " (a file changed while the ranks opened it, or their hosts hold different copies); "
          "every rank must read the same files"));
    }
  }
  return absl::OkStatus();
}

}  // namespace shardwise
