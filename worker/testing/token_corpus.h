#ifndef SHARDWISE_WORKER_TESTING_TOKEN_CORPUS_H_
#define SHARDWISE_WORKER_TESTING_TOKEN_CORPUS_H_

// Token files (uint16 ids, as data.tokens reads them) that a small GPT can learn: short
// "words" of ids below 22 drawn in a seeded order, each followed by id 0.

#include <cstdint>
#include <string>

#include "proto/job_spec.pb.h"

namespace shardwise::testing {

// Writes `count` tokens to `path`; returns the path.
std::string WriteLearnableTokens(const std::string& path, int count, uint64_t seed);

// The GPT the tests train on such files: a vocabulary of 32 ids, 2 blocks of 2 heads.
v1::GptConfig CorpusGpt(int64_t block_size, int64_t n_embd);

}  // namespace shardwise::testing

#endif  // SHARDWISE_WORKER_TESTING_TOKEN_CORPUS_H_
