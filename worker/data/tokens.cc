#include "worker/data/tokens.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "worker/data/safetensors.h"

namespace shardwise {
namespace {

absl::Status Invalid(const std::string& field, const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("job.", field, " '", path, "': ", what));
}

int64_t Load(const char* p, int element) {
  switch (element) {
    case 2: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case 4: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    default: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
}

// Where the ids lie in a mapped file, and their width.
struct TokenSpan {
  const char* begin;
  int element;
  int64_t count;
};

absl::StatusOr<TokenSpan> Locate(const std::string& field, const std::string& path,
                                 v1::TokenData::Format format, const char* data, size_t bytes) {
  if (format == v1::TokenData::UINT16) {
    if (bytes % 2 != 0) {
      return Invalid(field, path, absl::StrCat("has ", bytes, " bytes, not a whole number of "
                                               "uint16 ids"));
    }
    return TokenSpan{data, 2, static_cast<int64_t>(bytes / 2)};
  }
  auto index = ParseSafetensorsIndex(path, std::string_view(data, bytes));
  if (!index.ok()) return Invalid(field, path, std::string(index.status().message()));
  auto it = index->tensors.find("tokens");
  if (it == index->tensors.end() || it->second.shape.size() != 1 || it->second.dtype == "F32") {
    return Invalid(field, path, "needs a 1-D tensor 'tokens' of U16, I32 or I64");
  }
  return TokenSpan{data + it->second.begin, SafetensorsDtypeSize(it->second.dtype),
                   it->second.shape[0]};
}

}  // namespace

int64_t SequenceStart(uint64_t seed, int64_t index, int64_t num_tokens, int64_t block_size) {
  uint64_t z = seed + (static_cast<uint64_t>(index) + 1) * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<int64_t>(z % static_cast<uint64_t>(num_tokens - block_size));
}

v1::TokenData::Format ResolveTokenFormat(const std::string& path, v1::TokenData::Format format) {
  if (format != v1::TokenData::FORMAT_UNSPECIFIED) return format;
  return absl::EndsWith(path, ".safetensors") ? v1::TokenData::SAFETENSORS
                                              : v1::TokenData::UINT16;
}

absl::StatusOr<std::unique_ptr<TokenFile>> TokenFile::Open(const std::string& field,
                                                           const std::string& path,
                                                           v1::TokenData::Format format,
                                                           int64_t vocab_size,
                                                           int64_t block_size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Invalid(field, path, absl::StrCat("cannot open: ", std::strerror(errno)));
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return Invalid(field, path, "is not a regular file");
  }
  const size_t bytes = static_cast<size_t>(info.st_size);
  void* map = bytes > 0 ? ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0) : nullptr;
  ::close(fd);
  if (map == MAP_FAILED) return Invalid(field, path, absl::StrCat("cannot map: ", std::strerror(errno)));
  std::unique_ptr<TokenFile> file;
  auto span = Locate(field, path, ResolveTokenFormat(path, format), static_cast<const char*>(map), bytes);
  if (!span.ok()) {
    if (map != nullptr) ::munmap(map, bytes);
    return span.status();
  }
  file.reset(new TokenFile(map, bytes, span->begin, span->element, span->count));
  if (file->size() < block_size + 1) {
    return Invalid(field, path, absl::StrCat("holds ", file->size(), " tokens; a sequence of "
                                             "model.gpt.block_size ", block_size,
                                             " needs at least ", block_size + 1));
  }
  for (int64_t i = 0; i < file->size(); ++i) {
    const int64_t id = file->at(i);
    if (id < 0 || id >= vocab_size) {
      return Invalid(field, path, absl::StrCat(
          "token ", i, " (byte offset ", span->begin - static_cast<const char*>(map) +
          i * span->element, ") is ", id, ", not an id below model.gpt.vocab_size ", vocab_size));
    }
  }
  return file;
}

TokenFile::~TokenFile() {
  if (map_ != nullptr) ::munmap(const_cast<void*>(map_), map_bytes_);
}

int64_t TokenFile::at(int64_t i) const { return Load(tokens_ + i * element_, element_); }

model::MicroBatch TokenMicroBatch(const TokenFile& file, uint64_t seed, int64_t first,
                                  int64_t count, int64_t block_size) {
  model::MicroBatch batch;
  batch.sequences = count;
  batch.sequence_length = block_size;
  batch.rows = count * block_size;
  batch.tokens.reserve(batch.rows);
  batch.labels.reserve(batch.rows);
  for (int64_t j = 0; j < count; ++j) {
    const int64_t start = SequenceStart(seed, first + j, file.size(), block_size);
    for (int64_t t = 0; t < block_size; ++t) {
      batch.tokens.push_back(file.at(start + t));
      batch.labels.push_back(file.at(start + t + 1));
    }
  }
  return batch;
}

}  // namespace shardwise
