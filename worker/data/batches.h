#ifndef SHARDWISE_WORKER_DATA_BATCHES_H_
#define SHARDWISE_WORKER_DATA_BATCHES_H_

// The micro-batches one rank trains and evaluates on: rows of the MLP's dataset
// (dataset.h) or sequences of a GPT's token files (tokens.h). Every rank of a world draws
// from the same global batch of each step and takes its own part, so any world size
// trains on the same data.
//
// Thread-safety: const methods may be called from any thread.

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "proto/job_spec.pb.h"
#include "worker/data/batch.h"
#include "worker/data/data_identity.h"

namespace shardwise {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Micro-step `micro` of optimizer step `step`. An error: a file read during training
  // that changed since it was opened (worker/data/tokens.h).
  virtual absl::StatusOr<MicroBatch> Train(int64_t step, int micro) const = 0;
  // Micro-step `micro` of evaluation batch `batch` (has_validation() only).
  virtual absl::StatusOr<MicroBatch> Validation(int64_t batch, int micro) const = 0;
  virtual bool has_validation() const = 0;
  // Tokens in one step's global batch (0 for the MLP).
  virtual int64_t tokens_per_step() const = 0;
  // What was opened, for the ranks to compare (worker/data/data_identity.h).
  virtual DataIdentity identity() const = 0;
  // The same data as rank `rank` of the job takes it (a fault-tolerant rank covering a
  // rank that left): the files, opened and checked once, shared, not opened again.
  virtual std::unique_ptr<BatchSource> ForRank(int rank) const = 0;
};

// The job's data for its rank `rank`: its share of each global batch, laid out over the
// job's ranks (contracts/job_ranks.h, JobRanks: world_size, or more when the job may
// grow). INVALID_ARGUMENT naming the field when a file does not fit the model.
absl::StatusOr<std::unique_ptr<BatchSource>> OpenBatchSource(const v1::JobSpec& spec, int rank);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_DATA_BATCHES_H_
