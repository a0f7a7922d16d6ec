#ifndef SHARDWISE_CONTRACTS_SAFETENSORS_H_
#define SHARDWISE_CONTRACTS_SAFETENSORS_H_

// The safetensors format: an 8-byte little-endian header length N, N bytes of JSON
// ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}},
// padded with spaces to a multiple of 8), then the tensors' bytes, little-endian,
// row-major. Shardwise reads F32 and I64 tensors (and BF16 and F16 weights of Hugging
// Face checkpoints) and writes F32 ones; its index of a file's tensors also covers U16 and
// I32 (token ids).

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "common/safe_write.h"
#include "common/untrusted_file.h"

namespace shardwise {

struct HostTensor {
  std::string dtype;  // "F32" or "I64"; "BF16" or "F16" where asked for
  std::vector<int64_t> shape;
  std::string bytes;
  int64_t numel() const;
  const float* f32() const { return reinterpret_cast<const float*>(bytes.data()); }
  const int64_t* i64() const { return reinterpret_cast<const int64_t*>(bytes.data()); }
};

using TensorMap = std::map<std::string, HostTensor>;
// The header's "__metadata__": string keys and values.
using Metadata = std::map<std::string, std::string>;

// Where each tensor of a file lies, from its header alone.
struct SafetensorsEntry {
  std::string dtype;  // "F32", "BF16", "F16", "I64", "I32" or "U16"
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets in the file
};
struct SafetensorsIndex {
  std::map<std::string, SafetensorsEntry> tensors;
  Metadata metadata;
};

// Whole files up to this size are read (an MLP dataset, the model `shardwise sample`
// loads). Files read through their index, a tensor range at a time (initial weights,
// Hugging Face's shards, a checkpoint's shards), and token files, read a sequence at a
// time (worker/data/tokens.h), have no bound of their own: only their header is read
// whole (at most 100 MiB). A 7B model's AdamW shard in a shard group of one is 84 GB.
inline constexpr uint64_t kMaxSafetensorsFileBytes = uint64_t{64} << 30;
inline constexpr uint64_t kIndexedSafetensorsFileBytes = std::numeric_limits<uint64_t>::max();

// The index of a file whose bytes are `file` (the whole file); DATA_LOSS naming `path`
// and what is wrong when the header is malformed or an entry does not fit the file.
absl::StatusOr<SafetensorsIndex> ParseSafetensorsIndex(const std::string& path,
                                                       std::string_view file);
// The same from the file on disk, reading only its header (at most 100 MiB), the file
// opened as common/untrusted_file.h opens it (`links`: whether a link in its path is
// followed): NOT_FOUND if it is missing, INVALID_ARGUMENT if it is not a regular file.
absl::StatusOr<SafetensorsIndex> ReadSafetensorsIndex(const std::string& path,
                                                      Links links = Links::kFollow);
// The same from a file already open (`path` names it in errors), so that the tensors
// read at the index's offsets afterwards come from the file whose header was checked.
absl::StatusOr<SafetensorsIndex> ReadSafetensorsIndex(const UntrustedFile& file,
                                                      const std::string& path);

// The size of one element of `dtype`, 0 for a dtype Shardwise does not know.
int SafetensorsDtypeSize(const std::string& dtype);

// NOT_FOUND if the file cannot be read; DATA_LOSS naming what is wrong if it is not valid
// safetensors (or holds a dtype other than F32 and I64, and BF16 and F16 if
// `with_16_bit_floats`: their bytes as stored). Opened as common/untrusted_file.h opens a
// file (`links`: whether a link in its path is followed).
absl::StatusOr<TensorMap> ReadSafetensors(const std::string& path, bool with_16_bit_floats = false,
                                          Links links = Links::kFollow);
// The same from the file's bytes, read by the caller (`path` names it in errors).
absl::StatusOr<TensorMap> ParseSafetensors(const std::string& path, const std::string& file,
                                           bool with_16_bit_floats = false);

// A file's metadata (NOT_FOUND / DATA_LOSS as ReadSafetensors).
absl::StatusOr<Metadata> ReadSafetensorsMetadata(const std::string& path);

// The file's bytes for `tensors` (F32), in the map's (name) order; the metadata holds
// "format": "pt" and `metadata`.
std::string EncodeSafetensors(const TensorMap& tensors, const Metadata& metadata = {});

// Writes atomically (common/safe_write.h: a temporary file created exclusively, then
// renamed into place, never through a link); an existing file is replaced only if
// `replace` (ALREADY_EXISTS otherwise).
absl::Status WriteSafetensors(const std::string& path, const TensorMap& tensors,
                              const Metadata& metadata = {}, bool replace = true);

// A tensor as a header lists it, before its bytes exist.
struct TensorLayout {
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
};
using TensorLayouts = std::map<std::string, TensorLayout>;

// The file's first bytes for tensors laid out as `layouts`, in the map's (name) order:
// the header's length, the header (with "format": "pt" and `metadata`), its padding.
std::string EncodeSafetensorsHeader(const TensorLayouts& layouts, const Metadata& metadata);

// Writes as WriteSafetensors, the same bytes, without the tensors in memory at once:
// `append_tensor` appends the bytes of the tensor it is given the name of, called in the
// map's order, one tensor at a time (a checkpoint's shard is copied from the device a
// unit at a time). INTERNAL, and nothing written, when it appends another number of
// bytes than the tensor's layout says.
absl::Status WriteSafetensorsStreamed(
    const std::string& path, const TensorLayouts& layouts, const Metadata& metadata,
    absl::FunctionRef<absl::Status(const std::string& name, FileAppender& file)> append_tensor,
    bool replace = true);

HostTensor F32Tensor(std::vector<int64_t> shape, const float* data);

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_SAFETENSORS_H_
