#ifndef SHARDWISE_WORKER_COMPUTE_CPU_EMBEDDING_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_EMBEDDING_H_

// nn.Embedding on the CPU: a lookup forward, a deterministic scatter-add backward (rows
// added in the order of `ids`, as PyTorch's CPU embedding_backward does).

#include <cstdint>

namespace shardwise::cpu {

// out[i, :] = table[ids[i], :] for i < n.
template <typename T>
void EmbeddingForward(const T* table, const int64_t* ids, int64_t n, int64_t dim, T* out);

// dtable[ids[i], :] += dout[i, :] for i = 0, 1, ..., n - 1.
template <typename T>
void EmbeddingBackward(const int64_t* ids, const T* dout, int64_t n, int64_t dim, T* dtable);

}  // namespace shardwise::cpu

#endif  // SHARDWISE_WORKER_COMPUTE_CPU_EMBEDDING_H_
