#include "worker/data/huggingface_weights.h"

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/path_policy.h"
#include "common/status_macros.h"
#include "common/untrusted_file.h"
#include "contracts/huggingface_layout.h"
#include "worker/compute/casts.h"

namespace shardwise {
namespace {

constexpr char kField[] = "job.init.huggingface";

// Elements [begin, begin + n) of `tensor` as FP32 into `out` (F32 as stored, BF16 and F16
// widened exactly).
void WidenInto(const HostTensor& tensor, int64_t begin, int64_t n, float* out) {
  const auto* bits = reinterpret_cast<const uint16_t*>(tensor.bytes.data()) + begin;
  if (tensor.dtype == "BF16") {
    cpu::BFloat16ToFloat(bits, out, n);
  } else if (tensor.dtype == "F16") {
    cpu::HalfToFloat(bits, out, n);
  } else {
    std::copy(tensor.f32() + begin, tensor.f32() + begin + n, out);
  }
}

// values [rows, cols] -> [cols, rows].
std::vector<float> Transposed(const std::vector<float>& values, int64_t rows, int64_t cols) {
  std::vector<float> out(values.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = values[r * cols + c];
  }
  return out;
}

// Where row `row` of a matrix of `rows` rows goes: itself, or for Meta's interleaved q or
// k weight [heads * head_dim, in] (`heads` > 0) its row in HF's order: within each head,
// Meta's row 2i + p is HF's row p * head_dim / 2 + i (convert_llama_weights_to_hf.py's
// permute).
int64_t RowInHfOrder(int64_t row, int64_t rows, int64_t heads) {
  if (heads <= 0) return row;
  const int64_t head_dim = rows / heads, within = row % head_dim;
  return row - within + (within % 2) * (head_dim / 2) + within / 2;
}

// The stored tensor as FP32 in the model's layout (GPT-2's Conv1D weights transposed,
// Meta's q and k rows reordered), written in one pass a row at a time: besides the stored
// bytes, one FP32 copy of the tensor and one row.
HostTensor ToModelLayout(const HuggingFaceTensor& t, const HostTensor& stored) {
  const bool matrix = stored.shape.size() == 2;
  const int64_t rows = matrix ? stored.shape[0] : 1;
  const int64_t cols = matrix ? stored.shape[1] : stored.numel();
  HostTensor out;
  out.dtype = "F32";
  out.shape = t.transposed ? std::vector<int64_t>{cols, rows} : stored.shape;
  out.bytes.resize(stored.numel() * sizeof(float));
  float* values = reinterpret_cast<float*>(out.bytes.data());
  const int64_t out_rows = t.transposed ? cols : rows;
  const int64_t heads = matrix ? t.interleaved_heads : 0;
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    WidenInto(stored, r * cols, cols, row.data());
    if (!t.transposed) {
      std::copy(row.begin(), row.end(), values + RowInHfOrder(r, out_rows, heads) * cols);
      continue;
    }
    for (int64_t c = 0; c < cols; ++c) values[RowInHfOrder(c, out_rows, heads) * rows + r] = row[c];
  }
  return out;
}

// Gives `take` the tensors of `located` that lie in `path`, read one at a time from the
// file opened once: each as checked from the header, or DATA_LOSS.
absl::Status ReadTensorsOfFile(const std::string& path,
                               const std::vector<const LocatedTensor*>& located, TensorSink take) {
  // Not through a link, as when it was checked: one put there since is refused.
  ASSIGN_OR_RETURN(const UntrustedFile file, UntrustedFile::Open(path, kMaxSafetensorsFileBytes,
                                                                 InsideFolder(kCheckedPathLinks)));
  ASSIGN_OR_RETURN(const SafetensorsIndex index, ReadSafetensorsIndex(file, path));
  HostTensor stored;
  for (const LocatedTensor* l : located) {
    // The file was checked from its header; one changed since is refused, not trusted.
    const auto it = index.tensors.find(l->tensor.key);
    if (it == index.tensors.end() || it->second.shape != l->entry.shape ||
        it->second.dtype != l->entry.dtype) {
      return absl::DataLossError(absl::StrCat(kField, ".dir: '", path, "' changed while read: ",
                                              "tensor '", l->tensor.key, "' is not as checked"));
    }
    stored.dtype = it->second.dtype;
    stored.shape = it->second.shape;
    stored.bytes.resize(it->second.end - it->second.begin);
    RETURN_IF_ERROR(file.ReadAt(it->second.begin, stored.bytes.size(), stored.bytes.data()));
    RETURN_IF_ERROR(take(l->tensor.param, ToModelLayout(l->tensor, stored)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadHuggingFaceWeights(const v1::ModelSpec& model,
                                    const v1::HuggingFaceCheckpoint& checkpoint, TensorSink take) {
  ASSIGN_OR_RETURN(const std::vector<LocatedTensor> located,
                   LocateHuggingFaceTensors(model, checkpoint, kField, kCheckedPathLinks));
  std::map<std::string, std::vector<const LocatedTensor*>> by_file;
  for (const LocatedTensor& l : located) by_file[l.file].push_back(&l);
  for (const auto& [file, tensors] : by_file) {
    RETURN_IF_ERROR(ReadTensorsOfFile(file, tensors, take));
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorMap> ReadHuggingFaceWeights(const v1::ModelSpec& model,
                                                 const v1::HuggingFaceCheckpoint& checkpoint) {
  return CollectTensors(
      [&](TensorSink take) { return ReadHuggingFaceWeights(model, checkpoint, take); });
}

absl::StatusOr<TensorMap> ToHuggingFaceLayout(const v1::ModelSpec& model,
                                              const TensorMap& weights) {
  ASSIGN_OR_RETURN(
      const std::vector<HuggingFaceTensor> layout,
      HuggingFaceTensors(model, v1::HuggingFaceCheckpoint::HUGGING_FACE, "output.huggingface_dir"));
  TensorMap out;
  for (const HuggingFaceTensor& t : layout) {
    const auto it = weights.find(t.param);
    if (it == weights.end()) {
      return absl::InternalError(absl::StrCat("the final model lacks ", t.param));
    }
    if (!t.transposed) {
      out[t.key] = it->second;
      continue;
    }
    const std::vector<float> values(it->second.f32(), it->second.f32() + it->second.numel());
    out[t.key] = F32Tensor(t.shape, Transposed(values, t.shape[1], t.shape[0]).data());
  }
  return out;
}

}  // namespace shardwise
