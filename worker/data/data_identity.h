#ifndef SHARDWISE_WORKER_DATA_DATA_IDENTITY_H_
#define SHARDWISE_WORKER_DATA_DATA_IDENTITY_H_

// What a rank read of a job's data, for the ranks to compare before they train. Each rank
// opens the job's files on its own host, and a batch is a function of the file's size
// (worker/data/tokens.h: a sequence starts at z mod (N - T)): ranks that opened different
// files (one rewritten while they opened it, a host with a stale copy) would train on
// overlapping or missing sequences, and a replica's gradients on other data, without a
// word. The ranks exchange their identities (RankTrainer, at the attempt's start) and fail
// the attempt where any differs from rank 0's.
//
// A token file's identity is its id count and a fingerprint of its ids, taken as the file
// is opened (every id is read then anyway, to check it). The MLP's data has its sample
// count only: a synthetic set is drawn by each host's own floating-point kernels, which
// may differ in the last bit without the data being another.

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "proto/job_spec.pb.h"

namespace shardwise {

struct DataIdentity {
  int64_t train_count = 0;                                     // tokens, or the MLP's samples
  int64_t validation_count = 0;                                // 0 without a validation file
  uint64_t train_fingerprint = 0, validation_fingerprint = 0;  // 0: not taken (the MLP)

  static constexpr int kPackedSize = 4;
  // As int64s, for a collective (ScalarType::kInt64), and back.
  std::array<int64_t, kPackedSize> Pack() const;
  static DataIdentity Unpack(const int64_t* packed);
  bool operator==(const DataIdentity& other) const;
};

// The fingerprint of the ids `fingerprint` stands for followed by `ids`
// (kEmptyFingerprint for none before them): FNV-1a over the ids as 64-bit words (not bytes),
// so a file's fingerprint is the same whether it is read whole or a chunk at a time, and
// on every host. A check against accidents, not against a file made to collide.
inline constexpr uint64_t kEmptyFingerprint = 0xcbf29ce484222325ULL;  // FNV's offset basis
uint64_t FingerprintIds(uint64_t fingerprint, const int64_t* ids, size_t count);

// OK when every rank's identity (`by_rank`, indexed by rank) is rank 0's; else
// FAILED_PRECONDITION naming the first field of `spec` that differs, rank 0's and the
// first differing rank's counts or fingerprints.
absl::Status CheckEveryRankReadTheSameData(const v1::JobSpec& spec,
                                           const std::vector<DataIdentity>& by_rank);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_DATA_DATA_IDENTITY_H_
