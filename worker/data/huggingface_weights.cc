#include "worker/data/huggingface_weights.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
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

// Elements [begin, begin + n) of values stored as `dtype` at `bytes`, as FP32 into `out`
// (F32 as stored, BF16 and F16 widened exactly).
void WidenInto(const std::string& dtype, const char* bytes, int64_t begin, int64_t n, float* out) {
  const auto* bits = reinterpret_cast<const uint16_t*>(bytes) + begin;
  if (dtype == "BF16") {
    cpu::BFloat16ToFloat(bits, out, n);
  } else if (dtype == "F16") {
    cpu::HalfToFloat(bits, out, n);
  } else {
    const auto* values = reinterpret_cast<const float*>(bytes) + begin;
    std::copy(values, values + n, out);
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

// The stored row that holds the model's row `row` of a matrix of `rows` rows: itself, or
// for Meta's interleaved q or k weight [heads * head_dim, in] (`heads` > 0) the row HF's
// rotate-half order took it from: within each head, HF's row p * head_dim / 2 + i is
// Meta's row 2i + p (convert_llama_weights_to_hf.py's permute).
int64_t StoredRowOf(int64_t row, int64_t rows, int64_t heads) {
  if (heads <= 0) return row;
  const int64_t head_dim = rows / heads, within = row % head_dim, half = head_dim / 2;
  return row - within + 2 * (within % half) + within / half;
}

// A stored tensor as a matrix: its rows, and its columns (a vector is one row).
struct StoredMatrix {
  int64_t rows = 1;
  int64_t cols = 0;
  int64_t heads = 0;  // Meta's interleaved heads, for a matrix
};

StoredMatrix MatrixOf(const LocatedTensor& l) {
  const std::vector<int64_t>& shape = l.entry.shape;
  StoredMatrix m;
  if (shape.size() == 2) {
    m.rows = shape[0];
    m.cols = shape[1];
    m.heads = l.tensor.interleaved_heads;
  } else {
    m.cols = 1;
    for (const int64_t d : shape) m.cols *= d;
  }
  return m;
}

// Elements `wanted` (not empty) of a GPT-2 Conv1D weight (stored [in, out], the model's
// [out, in]) as FP32: each of the model's rows is a stored column, so every stored row
// holds some of them and the tensor is read whole; each stored row is widened in turn and
// its wanted elements scattered into place. Besides `values`, the stored bytes and a row.
absl::Status ReadTransposed(const UntrustedFile& file, const LocatedTensor& l, ElementRange wanted,
                            std::vector<float>* values) {
  const StoredMatrix m = MatrixOf(l);  // the model's rows are its columns
  std::string stored(l.entry.end - l.entry.begin, '\0');
  RETURN_IF_ERROR(file.ReadAt(l.entry.begin, stored.size(), stored.data()));
  values->resize(wanted.size());
  const int64_t first = wanted.begin / m.rows, last = (wanted.end - 1) / m.rows;
  std::vector<float> row(m.cols);
  for (int64_t s = 0; s < m.rows; ++s) {
    WidenInto(l.entry.dtype, stored.data(), s * m.cols, m.cols, row.data());
    for (int64_t r = first; r <= last; ++r) {
      const int64_t element = r * m.rows + s;  // the model's (r, s)
      if (element >= wanted.begin && element < wanted.end) {
        (*values)[element - wanted.begin] = row[r];
      }
    }
  }
  return absl::OkStatus();
}

// Elements `wanted` (not empty) of a tensor whose rows are the model's (Meta's q and k
// rows reordered within each head), as FP32: only the stored rows that hold the wanted
// rows are read, one run from the first to the last (at most a head's rows past the
// wanted ones at each end), and each wanted row widened into place. Besides `values`,
// the run's stored bytes.
absl::Status ReadRows(const UntrustedFile& file, const LocatedTensor& l, ElementRange wanted,
                      std::vector<float>* values) {
  const StoredMatrix m = MatrixOf(l);
  const int64_t first = wanted.begin / m.cols, last = (wanted.end - 1) / m.cols;
  int64_t lo = m.rows, hi = 0;
  for (int64_t r = first; r <= last; ++r) {
    lo = std::min(lo, StoredRowOf(r, m.rows, m.heads));
    hi = std::max(hi, StoredRowOf(r, m.rows, m.heads) + 1);
  }
  const int64_t row_bytes = m.cols * SafetensorsDtypeSize(l.entry.dtype);
  std::string stored((hi - lo) * row_bytes, '\0');
  RETURN_IF_ERROR(file.ReadAt(l.entry.begin + lo * row_bytes, stored.size(), stored.data()));
  values->resize(wanted.size());
  for (int64_t r = first; r <= last; ++r) {
    const ElementRange row = Intersect({r * m.cols, (r + 1) * m.cols}, wanted);
    const int64_t from = (StoredRowOf(r, m.rows, m.heads) - lo) * m.cols + row.begin - r * m.cols;
    WidenInto(l.entry.dtype, stored.data(), from, row.size(),
              values->data() + (row.begin - wanted.begin));
  }
  return absl::OkStatus();
}

// `l` as the file opened now holds it: where the file was changed since it was checked,
// the tensor must still be there with the dtype and shape checked (DATA_LOSS otherwise).
absl::StatusOr<LocatedTensor> AsChecked(const SafetensorsIndex& index, const LocatedTensor& l,
                                        const std::string& path) {
  const auto it = index.tensors.find(l.tensor.key);
  if (it == index.tensors.end() || it->second.shape != l.entry.shape ||
      it->second.dtype != l.entry.dtype) {
    return absl::DataLossError(absl::StrCat(kField, ".dir: '", path, "' changed while read: ",
                                            "tensor '", l.tensor.key, "' is not as checked"));
  }
  LocatedTensor now = l;
  now.entry = it->second;
  return now;
}

// Gives `receiver` what it wants of each tensor of `located`, all in `path`, read one at a
// time from the file opened once; DATA_LOSS for a file changed since it was checked.
absl::Status ReadTensorsOfFile(const std::string& path,
                               const std::vector<const LocatedTensor*>& located,
                               ParameterReceiver& receiver) {
  // Not through a link, as when it was checked: one put there since is refused.
  ASSIGN_OR_RETURN(const UntrustedFile file, UntrustedFile::Open(path, kIndexedSafetensorsFileBytes,
                                                                 InsideFolder(kCheckedPathLinks)));
  ASSIGN_OR_RETURN(const SafetensorsIndex index, ReadSafetensorsIndex(file, path));
  std::vector<float> values;  // what is wanted of one tensor at a time
  for (const LocatedTensor* checked : located) {
    ASSIGN_OR_RETURN(const LocatedTensor l, AsChecked(index, *checked, path));
    const StoredMatrix m = MatrixOf(l);
    const std::vector<int64_t> shape =
        l.tensor.transposed ? std::vector<int64_t>{m.cols, m.rows} : l.entry.shape;
    const ElementRange wanted = WantedWithin(receiver, l.tensor.param, m.rows * m.cols);
    if (!wanted.empty()) {
      RETURN_IF_ERROR(l.tensor.transposed ? ReadTransposed(file, l, wanted, &values)
                                          : ReadRows(file, l, wanted, &values));
    }
    const float* const first = wanted.empty() ? nullptr : values.data();
    RETURN_IF_ERROR(receiver.Take(l.tensor.param, {shape, wanted, first}));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadHuggingFaceWeights(const v1::ModelSpec& model,
                                    const v1::HuggingFaceCheckpoint& checkpoint,
                                    ParameterReceiver& receiver) {
  ASSIGN_OR_RETURN(const std::vector<LocatedTensor> located,
                   LocateHuggingFaceTensors(model, checkpoint, kField, kCheckedPathLinks));
  std::map<std::string, std::vector<const LocatedTensor*>> by_file;
  for (const LocatedTensor& l : located) by_file[l.file].push_back(&l);
  for (const auto& [file, tensors] : by_file) {
    RETURN_IF_ERROR(ReadTensorsOfFile(file, tensors, receiver));
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorMap> ReadHuggingFaceWeights(const v1::ModelSpec& model,
                                                 const v1::HuggingFaceCheckpoint& checkpoint) {
  return CollectTensors([&](ParameterReceiver& receiver) {
    return ReadHuggingFaceWeights(model, checkpoint, receiver);
  });
}

namespace {

// Each tensor of HF's layout, by HF's name (the file's order).
absl::StatusOr<std::map<std::string, HuggingFaceTensor>> ExportedTensors(
    const v1::ModelSpec& model) {
  ASSIGN_OR_RETURN(
      const std::vector<HuggingFaceTensor> layout,
      HuggingFaceTensors(model, v1::HuggingFaceCheckpoint::HUGGING_FACE, "output.huggingface_dir"));
  std::map<std::string, HuggingFaceTensor> tensors;
  for (const HuggingFaceTensor& t : layout) tensors[t.key] = t;
  return tensors;
}

// The model's tensor `param` of `weights`, a copy; INTERNAL when it lacks it.
absl::StatusOr<HostTensor> FromMap(const TensorMap& weights, const std::string& param) {
  const auto it = weights.find(param);
  if (it == weights.end())
    return absl::InternalError(absl::StrCat("the final model lacks ", param));
  return it->second;
}

// GPT-2's Conv1D weight `t` from the model's `source`: [in, out] where ours is [out, in].
HostTensor TransposedTensor(const HuggingFaceTensor& t, const HostTensor& source) {
  const std::vector<float> values(source.f32(), source.f32() + source.numel());
  return F32Tensor(t.shape, Transposed(values, t.shape[1], t.shape[0]).data());
}

}  // namespace

absl::StatusOr<TensorMap> ToHuggingFaceLayout(const v1::ModelSpec& model,
                                              const TensorMap& weights) {
  ASSIGN_OR_RETURN(const auto tensors, ExportedTensors(model));
  TensorMap out;
  for (const auto& [key, t] : tensors) {
    ASSIGN_OR_RETURN(const HostTensor tensor, FromMap(weights, t.param));
    out[key] = t.transposed ? TransposedTensor(t, tensor) : tensor;
  }
  return out;
}

absl::Status WriteInHuggingFaceLayout(const std::string& path, const v1::ModelSpec& model,
                                      const TensorMap& weights, const Metadata& metadata,
                                      bool replace) {
  return WriteInHuggingFaceLayout(
      path, model, [&](const std::string& param) { return FromMap(weights, param); }, metadata,
      replace);
}

absl::StatusOr<std::vector<std::string>> HuggingFaceWriteOrder(const v1::ModelSpec& model) {
  ASSIGN_OR_RETURN(const auto tensors, ExportedTensors(model));
  std::vector<std::string> order;
  order.reserve(tensors.size());
  for (const auto& [key, t] : tensors) order.push_back(t.param);
  return order;
}

absl::Status WriteInHuggingFaceLayout(const std::string& path, const v1::ModelSpec& model,
                                      ParameterSource source, const Metadata& metadata,
                                      bool replace) {
  ASSIGN_OR_RETURN(const auto tensors, ExportedTensors(model));
  TensorLayouts layouts;
  for (const auto& [key, t] : tensors) {
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    layouts[key] = {"F32", t.shape, static_cast<uint64_t>(numel) * sizeof(float)};
  }
  return WriteSafetensorsStreamed(
      path, layouts, metadata,
      [&](const std::string& key, FileAppender& file) -> absl::Status {
        const HuggingFaceTensor& t = tensors.at(key);
        ASSIGN_OR_RETURN(const HostTensor tensor, source(t.param));
        if (tensor.dtype != "F32" || tensor.bytes.size() != layouts.at(key).bytes) {
          return absl::InternalError(absl::StrCat("the final model's ", t.param, " is ",
                                                  tensor.bytes.size(), " bytes of ", tensor.dtype,
                                                  ", not ", layouts.at(key).bytes, " of F32"));
        }
        return file.Append(t.transposed ? TransposedTensor(t, tensor).bytes : tensor.bytes);
      },
      replace);
}

}  // namespace shardwise
