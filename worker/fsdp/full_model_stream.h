#ifndef SHARDWISE_WORKER_FSDP_FULL_MODEL_STREAM_H_
#define SHARDWISE_WORKER_FSDP_FULL_MODEL_STREAM_H_

// The full model read a tensor at a time, so that the rank that writes a job's final
// model holds a unit or two of it, not all of it (4 bytes a parameter: 28 GB for a 7B
// model beside its shards). Each unit is all-gathered when the first of its tensors is
// read and let go after the last; a file written in name order reads a transformer's
// blocks one after another, and the root unit (embeddings, final norm, head), whose
// names sort first and last, throughout.

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "contracts/fsdp_layout.h"
#include "contracts/safetensors.h"
#include "worker/fsdp/fsdp_model.h"

namespace shardwise::fsdp {

// Which units reading parameters in a given order gathers, and when each is let go: the
// units in the order their first parameter is read, and for each unit the position of
// its last. Pure: every rank derives the same plan, and so makes the same collectives.
struct FullModelReadPlan {
  std::vector<int> params;          // per position read: the parameter's index in the layout
  std::vector<int> unit_order;      // the units, as their first parameter is read
  std::map<int, size_t> last_read;  // per unit: the position of its last parameter
};

// The plan for reading `names` (state-dict names) in this order; INVALID_ARGUMENT for a
// name the layout lacks or one named twice.
absl::StatusOr<FullModelReadPlan> PlanFullModelRead(const FlatLayout& layout,
                                                    const std::vector<std::string>& names);

class FullModelStream {
 public:
  // Reading `names` from `model` in this order: on the rank that writes (`to_host`), the
  // tensors; on the others, only their part in the gathers (Finish).
  static absl::StatusOr<FullModelStream> Make(FsdpModel* model,
                                              const std::vector<std::string>& names, bool to_host);

  // The tensor `name` (F32, its shape), the next of the order (INTERNAL naming both when
  // it is not: the writer and the plan disagree), gathering its unit when it is the
  // unit's first. A failed gather fails every later call with the same status.
  absl::StatusOr<HostTensor> Next(const std::string& name);

  // Makes the gathers the order has left (a rank that does not write, or a writer that
  // stopped early: a refusal, a full disk), so that every rank makes the same
  // collectives; at once with the failed gather's status after one failed.
  absl::Status Finish();

  // The most parameters' floats held on the host at once so far (tests).
  int64_t peak_held_floats() const { return peak_held_floats_; }

 private:
  FullModelStream(FsdpModel* model, FullModelReadPlan plan, bool to_host)
      : model_(model), plan_(std::move(plan)), to_host_(to_host) {}
  // Gathers the next unit of the plan's order, copied to the host with `to_host`.
  absl::Status GatherNextUnit(bool to_host);

  FsdpModel* model_;
  FullModelReadPlan plan_;
  bool to_host_;
  size_t next_read_ = 0;                    // position in plan_.params
  size_t next_gather_ = 0;                  // position in plan_.unit_order
  std::map<int, std::vector<float>> held_;  // gathered units not let go yet
  int64_t held_floats_ = 0, peak_held_floats_ = 0;
  absl::Status broken_;  // a gather's failure
};

}  // namespace shardwise::fsdp

#endif  // SHARDWISE_WORKER_FSDP_FULL_MODEL_STREAM_H_
