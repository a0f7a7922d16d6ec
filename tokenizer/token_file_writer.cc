#include "tokenizer/token_file_writer.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "tokenizer/durable_rename.h"

namespace shardwise {
namespace tokenizer {
namespace {

// Room for the safetensors header: its JSON, padded with spaces, fits in this whatever
// the count (a multiple of 8, so the ids start aligned).
constexpr size_t kHeaderRoom = 128;

std::string SafetensorsHeader(int64_t count) {
  std::string json = absl::StrCat(R"({"tokens":{"dtype":"I32","shape":[)", count,
                                  R"(],"data_offsets":[0,)", count * 4, "]}}");
  json.resize(kHeaderRoom - 8, ' ');
  std::string header(8, '\0');
  uint64_t size = json.size();
  for (int i = 0; i < 8; ++i) header[i] = static_cast<char>((size >> (8 * i)) & 0xFF);
  return header + json;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TokenFileWriter>> TokenFileWriter::Open(const std::string& stem,
                                                                       int64_t vocab_size) {
  const bool wide = vocab_size > 65536;
  std::unique_ptr<TokenFileWriter> writer(
      new TokenFileWriter(stem + (wide ? ".safetensors" : ".bin"), wide));
  writer->out_.open(writer->path_ + ".tmp", std::ios::binary | std::ios::trunc);
  if (!writer->out_)
    return absl::PermissionDeniedError(absl::StrCat("cannot write ", writer->path_, ".tmp"));
  if (wide) writer->out_ << SafetensorsHeader(0);
  return writer;
}

absl::Status TokenFileWriter::Append(const std::vector<int32_t>& ids) {
  std::string bytes;
  bytes.reserve(ids.size() * (wide_ ? 4 : 2));
  for (int32_t id : ids) {
    const auto value = static_cast<uint32_t>(id);
    for (int i = 0; i < (wide_ ? 4 : 2); ++i) bytes.push_back(static_cast<char>(value >> (8 * i)));
  }
  out_.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  count_ += static_cast<int64_t>(ids.size());
  if (!out_.good())
    return absl::ResourceExhaustedError(absl::StrCat("cannot write ", path_, ".tmp"));
  return absl::OkStatus();
}

TokenFileWriter::~TokenFileWriter() {
  if (finished_) return;
  out_.close();
  std::remove((path_ + ".tmp").c_str());
}

absl::Status TokenFileWriter::Finish() {
  if (wide_) {
    out_.seekp(0);
    out_ << SafetensorsHeader(count_);
  }
  out_.close();
  if (!out_.good())
    return absl::ResourceExhaustedError(absl::StrCat("cannot write ", path_, ".tmp"));
  if (absl::Status renamed = SyncAndRename(path_ + ".tmp", path_); !renamed.ok()) return renamed;
  finished_ = true;
  return absl::OkStatus();
}

}  // namespace tokenizer
}  // namespace shardwise
