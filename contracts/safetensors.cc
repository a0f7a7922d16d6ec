#include "contracts/safetensors.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/safe_write.h"
#include "common/status_macros.h"
#include "common/untrusted_file.h"
#include "contracts/safetensors_header.h"

namespace shardwise {
namespace {

absl::Status Corrupt(const std::string& path, const std::string& what) {
  return absl::DataLossError(absl::StrCat(path, ": not a valid safetensors file: ", what));
}

absl::StatusOr<std::string> ReadFile(const std::string& path, Links links = Links::kFollow) {
  // A regular file of bounded size: a FIFO would block, a device never end.
  return ReadUntrustedFile(path, kMaxSafetensorsFileBytes, links);
}

// A JSON string with its quotes and escapes.
std::string Quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

int SafetensorsDtypeSize(const std::string& dtype) {
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "I64") return 8;
  if (dtype == "U16" || dtype == "BF16" || dtype == "F16") return 2;
  return 0;
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

HostTensor F32Tensor(std::vector<int64_t> shape, const float* data) {
  HostTensor t;
  t.dtype = "F32";
  t.shape = std::move(shape);
  t.bytes.assign(reinterpret_cast<const char*>(data), t.numel() * sizeof(float));
  return t;
}

namespace {

uint64_t HeaderSize(std::string_view first_eight) {
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i)
    header_size = header_size << 8 | static_cast<uint8_t>(first_eight[i]);
  return header_size;
}

// The entries of `header` (JSON) of a file of `file_size` bytes.
absl::StatusOr<SafetensorsIndex> ParseHeader(const std::string& path, const std::string& header,
                                             uint64_t file_size);

}  // namespace

absl::StatusOr<SafetensorsIndex> ParseSafetensorsIndex(const std::string& path,
                                                       std::string_view file) {
  if (file.size() < 8) return Corrupt(path, "shorter than its 8-byte header length");
  const uint64_t header_size = HeaderSize(file);
  if (header_size > file.size() - 8) return Corrupt(path, "header length past the end");
  return ParseHeader(path, std::string(file.substr(8, header_size)), file.size());
}

absl::StatusOr<SafetensorsIndex> ReadSafetensorsIndex(const std::string& path, Links links) {
  auto file = UntrustedFile::Open(path, kIndexedSafetensorsFileBytes, links);
  if (!file.ok()) return file.status();
  return ReadSafetensorsIndex(*file, path);
}

absl::StatusOr<SafetensorsIndex> ReadSafetensorsIndex(const UntrustedFile& file,
                                                      const std::string& path) {
  constexpr uint64_t kMaxHeader = uint64_t{100} << 20;
  char first[8];
  if (file.size() < 8) return Corrupt(path, "shorter than its 8-byte header length");
  if (const absl::Status read = file.ReadAt(0, 8, first); !read.ok()) {
    // This host's trouble stays UNAVAILABLE: the file is not known to be damaged.
    return absl::IsUnavailable(read) ? read : Corrupt(path, "cannot read its header length");
  }
  const uint64_t header_size = HeaderSize(std::string_view(first, 8));
  if (header_size > file.size() - 8) return Corrupt(path, "header length past the end");
  if (header_size > kMaxHeader) return Corrupt(path, "a header of over 100 MiB");
  std::string header(header_size, '\0');
  if (const absl::Status read = file.ReadAt(8, header_size, header.data()); !read.ok()) {
    return absl::IsUnavailable(read) ? read : Corrupt(path, "cannot read its header");
  }
  return ParseHeader(path, header, file.size());
}

namespace {

absl::StatusOr<SafetensorsIndex> ParseHeader(const std::string& path, const std::string& header,
                                             uint64_t file_size) {
  const uint64_t data_start = 8 + header.size();
  auto parsed = ParseSafetensorsHeader(header, file_size - data_start, SafetensorsDtypeSize);
  if (!parsed.ok()) return Corrupt(path, std::string(parsed.status().message()));
  SafetensorsIndex index;
  index.metadata = std::move(parsed->metadata);
  for (auto& [name, entry] : parsed->tensors) {
    index.tensors[name] = {std::move(entry.dtype), std::move(entry.shape), data_start + entry.begin,
                           data_start + entry.end};
  }
  return index;
}

}  // namespace

absl::StatusOr<TensorMap> ReadSafetensors(const std::string& path, bool with_16_bit_floats,
                                          Links links) {
  auto data = ReadFile(path, links);
  if (!data.ok()) return data.status();
  return ParseSafetensors(path, *data, with_16_bit_floats);
}

absl::StatusOr<TensorMap> ParseSafetensors(const std::string& path, const std::string& file,
                                           bool with_16_bit_floats) {
  auto index = ParseSafetensorsIndex(path, file);
  if (!index.ok()) return index.status();
  TensorMap tensors;
  for (const auto& [name, entry] : index->tensors) {
    const bool narrow = entry.dtype == "BF16" || entry.dtype == "F16";
    if (entry.dtype != "F32" && entry.dtype != "I64" && !(narrow && with_16_bit_floats)) {
      return absl::DataLossError(
          absl::StrCat(path, ": tensor '", name, "' has dtype ", entry.dtype, "; Shardwise reads ",
                       with_16_bit_floats ? "F32, BF16, F16 and I64" : "F32 and I64", " here"));
    }
    HostTensor tensor;
    tensor.dtype = entry.dtype;
    tensor.shape = entry.shape;
    tensor.bytes = file.substr(entry.begin, entry.end - entry.begin);
    tensors[name] = std::move(tensor);
  }
  return tensors;
}

absl::StatusOr<Metadata> ReadSafetensorsMetadata(const std::string& path) {
  // The header alone: a model file of gigabytes is not read for its metadata.
  auto index = ReadSafetensorsIndex(path);
  if (!index.ok()) return index.status();
  return index->metadata;
}

std::string EncodeSafetensorsHeader(const TensorLayouts& layouts, const Metadata& metadata) {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"";
  for (const auto& [key, value] : metadata)
    absl::StrAppend(&header, ",", Quoted(key), ":", Quoted(value));
  header += "}";
  uint64_t offset = 0;
  for (const auto& [name, tensor] : layouts) {
    absl::StrAppend(&header, ",", Quoted(name), ":{\"dtype\":\"", tensor.dtype, "\",\"shape\":[");
    for (size_t i = 0; i < tensor.shape.size(); ++i) {
      absl::StrAppend(&header, i ? "," : "", tensor.shape[i]);
    }
    absl::StrAppend(&header, "],\"data_offsets\":[", offset, ",", offset + tensor.bytes, "]}");
    offset += tensor.bytes;
  }
  header += "}";
  // The data that follows starts 8-byte aligned, as the format's reference writer does.
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(header.size() >> (8 * i) & 0xff);
  return out + header;
}

namespace {

TensorLayouts LayoutsOf(const TensorMap& tensors) {
  TensorLayouts layouts;
  for (const auto& [name, tensor] : tensors) {
    layouts[name] = {tensor.dtype, tensor.shape, tensor.bytes.size()};
  }
  return layouts;
}

// Counts what passes through to the file, to hold each tensor to its layout.
class CountingAppender : public FileAppender {
 public:
  explicit CountingAppender(FileAppender& file) : file_(file) {}
  absl::Status Append(absl::string_view bytes) override {
    appended_ += bytes.size();
    return file_.Append(bytes);
  }
  uint64_t appended() const { return appended_; }

 private:
  FileAppender& file_;
  uint64_t appended_ = 0;
};

}  // namespace

std::string EncodeSafetensors(const TensorMap& tensors, const Metadata& metadata) {
  std::string out = EncodeSafetensorsHeader(LayoutsOf(tensors), metadata);
  for (const auto& [name, tensor] : tensors) out += tensor.bytes;
  return out;
}

absl::Status WriteSafetensors(const std::string& path, const TensorMap& tensors,
                              const Metadata& metadata, bool replace) {
  return WriteSafetensorsStreamed(
      path, LayoutsOf(tensors), metadata,
      [&](const std::string& name, FileAppender& file) {
        return file.Append(tensors.at(name).bytes);
      },
      replace);
}

absl::Status WriteSafetensorsStreamed(
    const std::string& path, const TensorLayouts& layouts, const Metadata& metadata,
    absl::FunctionRef<absl::Status(const std::string& name, FileAppender& file)> append_tensor,
    bool replace) {
  return WriteFileAtomically(
      path,
      [&](FileAppender& file) -> absl::Status {
        RETURN_IF_ERROR(file.Append(EncodeSafetensorsHeader(layouts, metadata)));
        for (const auto& [name, layout] : layouts) {
          CountingAppender counted(file);
          RETURN_IF_ERROR(append_tensor(name, counted));
          if (counted.appended() != layout.bytes) {
            return absl::InternalError(absl::StrCat("writing '", path, "': tensor '", name,
                                                    "' came with ", counted.appended(),
                                                    " bytes, its layout says ", layout.bytes));
          }
        }
        return absl::OkStatus();
      },
      replace);
}

}  // namespace shardwise
