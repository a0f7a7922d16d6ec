#include "worker/model/host_parameters.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardwise::model {

absl::StatusOr<HostParameters> HostParameters::FromTensors(const ModelDescription& description,
                                                           const TensorMap& tensors) {
  HostParameters params;
  for (const ParameterDesc& param : description.params) {
    auto it = tensors.find(param.name);
    if (it == tensors.end()) {
      return absl::InvalidArgumentError(absl::StrCat("no tensor '", param.name, "'"));
    }
    if (it->second.dtype != "F32" || it->second.shape != param.shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", param.name, "' is ", it->second.dtype, " [",
                       absl::StrJoin(it->second.shape, ", "), "], expected F32 [",
                       absl::StrJoin(param.shape, ", "), "]"));
    }
    params.values_.emplace_back(it->second.f32(), it->second.f32() + param.numel());
    params.grads_.emplace_back(param.numel(), 0.0f);
  }
  return params;
}

void HostParameters::ZeroGrads() {
  for (auto& grad : grads_) std::fill(grad.begin(), grad.end(), 0.0f);
}

}  // namespace shardwise::model
