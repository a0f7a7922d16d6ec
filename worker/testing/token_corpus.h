#ifndef SHARDWISE_WORKER_TESTING_TOKEN_CORPUS_H_
#define SHARDWISE_WORKER_TESTING_TOKEN_CORPUS_H_

// Token files (uint16 ids, as data.tokens reads them) that a small GPT can learn: short
// "words" of ids below 22 drawn in a seeded order, each followed by id 0.

#include <cstdint>
#include <string>

namespace shardwise::testing {

// Writes `count` tokens to `path`; returns the path.
std::string WriteLearnableTokens(const std::string& path, int count, uint64_t seed);

}  // namespace shardwise::testing

#endif  // SHARDWISE_WORKER_TESTING_TOKEN_CORPUS_H_
