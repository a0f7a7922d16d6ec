// A Hugging Face checkpoint folder from arbitrary bytes, checked as the coordinator checks
// one at submission (contracts/huggingface_layout.h) for a small Llama: the input is
// config.json, then after a NUL the weights file; with a first byte of 1, the index
// (model.safetensors.index.json) and then its one shard instead. Any input is refused or
// accepted without a crash, and what is accepted lies inside its file.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "contracts/huggingface_layout.h"
#include "tests/fuzz/fuzz_support.h"

namespace shardwise::fuzz {
namespace {

v1::ModelSpec SmallLlama() {
  v1::ModelSpec model;
  v1::LlamaConfig* llama = model.mutable_llama();
  llama->set_vocab_size(8);
  llama->set_hidden_size(4);
  llama->set_intermediate_size(8);
  llama->set_num_hidden_layers(1);
  llama->set_num_attention_heads(2);
  llama->set_num_key_value_heads(1);
  llama->set_max_position_embeddings(8);
  return model;
}

void Write(const std::string& name, std::string_view bytes) {
  WriteScratch("checkpoint/" + name, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace
}  // namespace shardwise::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardwise;
  using namespace shardwise::fuzz;
  if (size == 0) return 0;
  static const v1::ModelSpec model = SmallLlama();
  const std::string dir = ScratchDir() + "/checkpoint";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const bool sharded = data[0] == 1;
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t config_end = rest.find('\0');
  Write("config.json", rest.substr(0, config_end));
  rest = config_end == std::string_view::npos ? "" : rest.substr(config_end + 1);
  if (sharded) {
    const size_t index_end = rest.find('\0');
    Write("model.safetensors.index.json", rest.substr(0, index_end));
    Write("model-1.safetensors",
          index_end == std::string_view::npos ? "" : rest.substr(index_end + 1));
  } else {
    Write("model.safetensors", rest);
  }
  v1::HuggingFaceCheckpoint checkpoint;
  checkpoint.set_dir(dir);
  auto located = LocateHuggingFaceTensors(model, checkpoint, "fuzz", Links::kFollow);
  if (!located.ok()) return 0;
  for (const LocatedTensor& tensor : *located) {
    std::error_code error;
    const uint64_t file_size = std::filesystem::file_size(tensor.file, error);
    if (error || tensor.entry.begin > tensor.entry.end || tensor.entry.end > file_size) {
      __builtin_trap();  // a tensor promised outside its file
    }
  }
  return 0;
}
