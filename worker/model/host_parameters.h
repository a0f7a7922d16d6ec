#ifndef SHARDWISE_WORKER_MODEL_HOST_PARAMETERS_H_
#define SHARDWISE_WORKER_MODEL_HOST_PARAMETERS_H_

// A model's parameters and gradients in plain host vectors, one per parameter: the
// ParameterTable for running a model on the CPU without FSDP (sampling from a trained
// model, tests of the model layer). Only for a Device whose memory is the host's.

#include <vector>

#include "absl/status/statusor.h"
#include "contracts/model_description.h"
#include "contracts/safetensors.h"
#include "worker/model/stage.h"

namespace shardwise::model {

class HostParameters final : public ParameterTable {
 public:
  // The values of `tensors` by the description's names (F32, with their shapes):
  // INVALID_ARGUMENT naming the first that is missing or does not fit. Gradients start at 0.
  static absl::StatusOr<HostParameters> FromTensors(const ModelDescription& description,
                                                    const TensorMap& tensors);

  ConstTensorRef value(int param) const override { return values_[param].data(); }
  float* grad(int param) const override { return grads_[param].data(); }
  std::vector<float>& values(int param) { return values_[param]; }
  const std::vector<float>& grads(int param) const { return grads_[param]; }
  void ZeroGrads();

 private:
  std::vector<std::vector<float>> values_;
  mutable std::vector<std::vector<float>> grads_;
};

}  // namespace shardwise::model

#endif  // SHARDWISE_WORKER_MODEL_HOST_PARAMETERS_H_
