#include "contracts/weights_file.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace shardwise {

absl::Status CheckWeightsFit(const ModelDescription& model, const SafetensorsIndex& index,
                             const std::string& path) {
  for (const ParameterDesc& want : model.params) {
    const auto it = index.tensors.find(want.name);
    if (it == index.tensors.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", path, "' has no tensor '", want.name, "'"));
    }
    if (it->second.dtype != "F32" || it->second.shape != want.shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", path, "': tensor '", want.name, "' is ", it->second.dtype, " [",
                       absl::StrJoin(it->second.shape, ", "), "], expected F32 [",
                       absl::StrJoin(want.shape, ", "), "]"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorMap> CollectTensors(absl::FunctionRef<absl::Status(TensorSink)> read) {
  TensorMap tensors;
  RETURN_IF_ERROR(read([&](const std::string& name, const HostTensor& tensor) {
    tensors[name] = tensor;
    return absl::OkStatus();
  }));
  return tensors;
}

absl::Status ReadWeightsFile(const ModelDescription& model, const std::string& path, Links links,
                             TensorSink take) {
  ASSIGN_OR_RETURN(const UntrustedFile file,
                   UntrustedFile::Open(path, kMaxSafetensorsFileBytes, links));
  ASSIGN_OR_RETURN(const SafetensorsIndex index, ReadSafetensorsIndex(file, path));
  RETURN_IF_ERROR(CheckWeightsFit(model, index, path));
  HostTensor tensor;  // one parameter's bytes at a time
  for (const ParameterDesc& want : model.params) {
    const SafetensorsEntry& entry = index.tensors.at(want.name);
    tensor.dtype = entry.dtype;
    tensor.shape = entry.shape;
    tensor.bytes.resize(entry.end - entry.begin);
    RETURN_IF_ERROR(file.ReadAt(entry.begin, tensor.bytes.size(), tensor.bytes.data()));
    RETURN_IF_ERROR(take(want.name, tensor));
  }
  return absl::OkStatus();
}

}  // namespace shardwise
