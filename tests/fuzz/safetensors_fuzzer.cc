// The safetensors reader: the header index over arbitrary bytes, and the tensors it
// promises, which must lie inside the input with the bytes their dtype and shape need,
// and whose shapes multiply out in int64_t.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "contracts/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardwise;
  const std::string_view file(reinterpret_cast<const char*>(data), size);
  auto index = ParseSafetensorsIndex("fuzz.safetensors", file);
  if (!index.ok()) return 0;
  for (const auto& [name, entry] : index->tensors) {
    uint64_t numel = 1;
    int64_t product = 1;  // as the readers multiply shapes out, in int64_t
    for (int64_t d : entry.shape) {
      numel *= static_cast<uint64_t>(d);
      if (__builtin_mul_overflow(product, d, &product)) __builtin_trap();
    }
    if (entry.begin > entry.end || entry.end > size ||
        entry.end - entry.begin != numel * SafetensorsDtypeSize(entry.dtype)) {
      __builtin_trap();  // the index promised bytes the file does not have
    }
  }
  return 0;
}
