#include "worker/data/tokens.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "contracts/token_files.h"

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

}  // namespace

int64_t SequenceStart(uint64_t seed, int64_t index, int64_t num_tokens, int64_t block_size) {
  uint64_t z = seed + (static_cast<uint64_t>(index) + 1) * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<int64_t>(z % static_cast<uint64_t>(num_tokens - block_size));
}

absl::StatusOr<std::unique_ptr<TokenFile>> TokenFile::Open(const std::string& field,
                                                           const std::string& path,
                                                           v1::TokenData::Format format,
                                                           int64_t vocab_size, int64_t block_size) {
  ASSIGN_OR_RETURN(const TokenFileLayout layout, InspectTokenFile(field, path, format));
  if (layout.count < block_size + 1) {
    return Invalid(field, path,
                   absl::StrCat("holds ", layout.count,
                                " tokens; a sequence of "
                                "model.gpt.block_size ",
                                block_size, " needs at least ", block_size + 1));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Invalid(field, path, absl::StrCat("cannot open: ", std::strerror(errno)));
  const size_t bytes = layout.offset + layout.count * layout.element;
  // The file opened may not be the one inspected (replaced, or cut short, since): a map
  // past its end would kill the worker (SIGBUS) at the first read there.
  struct stat opened;
  if (::fstat(fd, &opened) != 0 || !S_ISREG(opened.st_mode) ||
      static_cast<uint64_t>(opened.st_size) < bytes) {
    ::close(fd);
    return Invalid(field, path, "changed between its inspection and its opening");
  }
  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED)
    return Invalid(field, path, absl::StrCat("cannot map: ", std::strerror(errno)));
  std::unique_ptr<TokenFile> file(new TokenFile(
      map, bytes, static_cast<const char*>(map) + layout.offset, layout.element, layout.count));
  for (int64_t i = 0; i < file->size(); ++i) {
    const int64_t id = file->at(i);
    if (id < 0 || id >= vocab_size) {
      return Invalid(
          field, path,
          absl::StrCat("token ", i, " (byte offset ", layout.offset + i * layout.element, ") is ",
                       id, ", not an id below model.gpt.vocab_size ", vocab_size));
    }
  }
  return file;
}

TokenFile::~TokenFile() {
  if (map_ != nullptr) ::munmap(const_cast<void*>(map_), map_bytes_);
}

int64_t TokenFile::at(int64_t i) const { return Load(tokens_ + i * element_, element_); }

MicroBatch TokenMicroBatch(const TokenFile& file, uint64_t seed, int64_t first, int64_t count,
                           int64_t block_size) {
  MicroBatch batch;
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
