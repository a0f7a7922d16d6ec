#include "worker/comm/multi_get_store.h"

#include <cstddef>

#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"

namespace shardwise {

std::vector<std::vector<char>> MultiGet(gloo::rendezvous::Store& store,
                                        const std::vector<StoreRead>& reads) {
  if (auto* batching = dynamic_cast<MultiGetStore*>(&store)) return batching->multiGet(reads);
  std::vector<std::vector<char>> values;
  values.reserve(reads.size());
  for (const StoreRead& read : reads) values.push_back(ReadPart(store.get(read.key), read));
  return values;
}

std::vector<char> ReadPart(const std::vector<char>& value, const StoreRead& read) {
  const size_t end = read.length == 0 ? value.size() : read.offset + read.length;
  if (read.offset > value.size() || end > value.size() || end < read.offset) {
    throw gloo::IoException(absl::StrCat("rendezvous: key '", read.key, "' has ", value.size(),
                                         " bytes, read from ", read.offset, " to ", end));
  }
  return std::vector<char>(value.begin() + static_cast<std::ptrdiff_t>(read.offset),
                           value.begin() + static_cast<std::ptrdiff_t>(end));
}

}  // namespace shardwise
