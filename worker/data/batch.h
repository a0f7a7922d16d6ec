#ifndef SHARDWISE_WORKER_DATA_BATCH_H_
#define SHARDWISE_WORKER_DATA_BATCH_H_

// One micro-batch as the data layer hands it to a model, in host memory.

#include <cstdint>
#include <vector>

namespace shardwise {

struct MicroBatch {
  int64_t rows = 0;             // samples (MLP) or token positions (GPT)
  int64_t sequences = 0;        // GPT: rows = sequences * sequence_length
  int64_t sequence_length = 0;  // GPT
  std::vector<float> inputs;    // MLP: [rows, in]
  std::vector<int64_t> tokens;  // GPT: [rows], sequence after sequence
  std::vector<int64_t> labels;  // cross-entropy: the class, or the next token, per row
  std::vector<float> targets;   // MLP with MSE: [rows, out]
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_DATA_BATCH_H_
