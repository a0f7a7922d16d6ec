// The token-file reader: a file of arbitrary bytes, read as raw uint16 or as safetensors
// (the first byte picks), opened, checked, and batched from. Every id a batch holds must
// be below the vocabulary.

#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_support.h"
#include "worker/data/tokens.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardwise;
  if (size == 0) return 0;
  const bool safetensors = data[0] & 1;
  const std::string path =
      fuzz::WriteScratch(safetensors ? "tokens.safetensors" : "tokens.bin", data + 1, size - 1);
  constexpr int64_t kVocab = 300, kBlock = 4;
  auto file = TokenFile::Open("data.tokens.train_path", path,
                              safetensors ? v1::TokenData::SAFETENSORS : v1::TokenData::UINT16,
                              TokenModel{"model.gpt", kVocab, kBlock}, Links::kFollow);
  if (!file.ok()) return 0;
  // The file is unchanged since it was opened: reading a batch cannot fail.
  const absl::StatusOr<MicroBatch> batch = TokenMicroBatch(**file, size, 7, 3, kBlock);
  if (!batch.ok()) __builtin_trap();
  for (int64_t id : batch->tokens) {
    if (id < 0 || id >= kVocab) __builtin_trap();
  }
  for (int64_t id : batch->labels) {
    if (id < 0 || id >= kVocab) __builtin_trap();
  }
  return 0;
}
