#include "contracts/weights_file.h"

#include <utility>
#include <vector>

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

int64_t ParameterPiece::numel() const {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

ElementRange WantedWithin(const ParameterReceiver& receiver, const std::string& name,
                          int64_t numel) {
  const ElementRange wanted = Intersect(receiver.Wanted(name, numel), {0, numel});
  return wanted.empty() ? ElementRange{} : wanted;
}

ParameterPiece PieceOfWhole(absl::Span<const int64_t> shape, ElementRange wanted,
                            const float* whole) {
  return {shape, wanted, wanted.empty() ? nullptr : whole + wanted.begin};
}

namespace {

// Wants every tensor whole and keeps a copy of each.
class TensorCollector : public ParameterReceiver {
 public:
  ElementRange Wanted(const std::string&, int64_t numel) const override { return {0, numel}; }
  absl::Status Take(const std::string& name, const ParameterPiece& piece) override {
    const std::vector<int64_t> shape(piece.shape.begin(), piece.shape.end());
    tensors[name] = F32Tensor(shape, piece.values);
    return absl::OkStatus();
  }

  TensorMap tensors;
};

}  // namespace

absl::StatusOr<TensorMap> CollectTensors(absl::FunctionRef<absl::Status(ParameterReceiver&)> read) {
  TensorCollector collector;
  RETURN_IF_ERROR(read(collector));
  return std::move(collector.tensors);
}

absl::Status ReadWeightsFile(const ModelDescription& model, const std::string& path, Links links,
                             ParameterReceiver& receiver) {
  ASSIGN_OR_RETURN(const UntrustedFile file,
                   UntrustedFile::Open(path, kIndexedSafetensorsFileBytes, links));
  ASSIGN_OR_RETURN(const SafetensorsIndex index, ReadSafetensorsIndex(file, path));
  RETURN_IF_ERROR(CheckWeightsFit(model, index, path));
  std::vector<float> values;  // what is wanted of one parameter at a time
  for (const ParameterDesc& want : model.params) {
    const SafetensorsEntry& entry = index.tensors.at(want.name);
    // F32 with the parameter's shape (CheckWeightsFit): the wanted elements are one run.
    const ElementRange range = WantedWithin(receiver, want.name, want.numel());
    values.resize(range.size());
    if (!range.empty()) {
      RETURN_IF_ERROR(file.ReadAt(entry.begin + range.begin * sizeof(float),
                                  range.size() * sizeof(float),
                                  reinterpret_cast<char*>(values.data())));
    }
    RETURN_IF_ERROR(receiver.Take(want.name, {want.shape, range, values.data()}));
  }
  return absl::OkStatus();
}

}  // namespace shardwise
