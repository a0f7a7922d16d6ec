#include "worker/testing/token_corpus.h"

#include <fstream>
#include <vector>

#include "worker/data/random.h"

namespace shardwise::testing {

std::string WriteLearnableTokens(const std::string& path, int count, uint64_t seed) {
  Random random(seed);
  std::vector<uint16_t> ids;
  const std::vector<std::vector<uint16_t>> words = {
      {1, 2, 3, 4}, {5, 6, 7}, {8, 9, 10, 11, 12}, {13, 14}, {15, 16, 17, 18}, {19, 20, 21}};
  while (static_cast<int>(ids.size()) < count) {
    const auto& word = words[random.Next() % words.size()];
    ids.insert(ids.end(), word.begin(), word.end());
    ids.push_back(0);  // a space
  }
  ids.resize(count);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(ids.data()),
             static_cast<std::streamsize>(ids.size() * 2));
  return path;
}

v1::GptConfig CorpusGpt(int64_t block_size, int64_t n_embd) {
  v1::GptConfig gpt;
  gpt.set_vocab_size(32);
  gpt.set_block_size(block_size);
  gpt.set_n_layer(2);
  gpt.set_n_head(2);
  gpt.set_n_embd(n_embd);
  return gpt;
}

}  // namespace shardwise::testing
