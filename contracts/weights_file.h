#ifndef SHARDWISE_CONTRACTS_WEIGHTS_FILE_H_
#define SHARDWISE_CONTRACTS_WEIGHTS_FILE_H_

// A safetensors file of initial weights (init.safetensors_path) against the model it
// initialises. The coordinator checks the file at submission from its header, and a
// worker again as it reads it (the file may have changed since): one rule for both.

#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "common/untrusted_file.h"
#include "contracts/model_description.h"
#include "contracts/safetensors.h"

namespace shardwise {

// OK if `index` holds every parameter of `model` as F32 with its shape; other tensors (a
// tied lm_head.weight, say) are ignored. Otherwise INVALID_ARGUMENT naming `path` and the
// first parameter missing, or of another dtype or shape.
absl::Status CheckWeightsFit(const ModelDescription& model, const SafetensorsIndex& index,
                             const std::string& path);

// Receives a model's tensors one at a time, by state-dict name, so that a reader never
// holds the whole model (a rank keeps its shard of each: worker/fsdp/shard_assembler.h).
// `tensor` is valid during the call only; an error stops the reading and is returned.
using TensorSink =
    absl::FunctionRef<absl::Status(const std::string& name, const HostTensor& tensor)>;

// The tensors `read` gives the sink it is called with, collected by name (the collecting
// form of a reader that streams).
absl::StatusOr<TensorMap> CollectTensors(absl::FunctionRef<absl::Status(TensorSink)> read);

// Gives `take` the parameters of `model` from the file at `path`, opened as `links` says,
// in the model's registration order: its header checked with CheckWeightsFit, then only
// those tensors read, one at a time (not the whole file). NOT_FOUND, INVALID_ARGUMENT or
// UNAVAILABLE as common/untrusted_file.h opens it, DATA_LOSS for a malformed file.
absl::Status ReadWeightsFile(const ModelDescription& model, const std::string& path, Links links,
                             TensorSink take);

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_WEIGHTS_FILE_H_
