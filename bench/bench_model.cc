#include "bench/bench_model.h"

#include <cstdint>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"

namespace shardwise::bench {

v1::GptConfig BenchGpt() {
  v1::GptConfig gpt;
  gpt.set_vocab_size(256);
  gpt.set_block_size(128);
  gpt.set_n_layer(4);
  gpt.set_n_head(4);
  gpt.set_n_embd(256);
  return gpt;
}

std::string WriteLicenseTokens(std::string path) {
  std::string text;
  for (const char* name : {"GPL-3", "GPL-2", "LGPL-2.1", "Apache-2.0", "GFDL-1.3", "MPL-2.0"}) {
    std::ifstream file(absl::StrCat("/usr/share/common-licenses/", name), std::ios::binary);
    std::stringstream bytes;
    bytes << file.rdbuf();
    text += bytes.str();
  }
  std::vector<uint16_t> ids(text.begin(), text.end());
  for (uint16_t& id : ids) id &= 0xff;
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(ids.data()),
             static_cast<std::streamsize>(ids.size() * 2));
  return path;
}

}  // namespace shardwise::bench
