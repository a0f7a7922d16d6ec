#ifndef SHARDWISE_WORKER_COMPUTE_CPU_LOSSES_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_LOSSES_H_

// The losses on the CPU, with their gradients, as torch.nn.functional computes them with
// reduction "mean" (sums in double).

#include <cstdint>

namespace shardwise::cpu {

// Mean cross-entropy over `rows` rows of logits[rows, classes] against int64 labels
// (F.cross_entropy: log-softmax, then the mean negative log-likelihood); writes
// dlogits = (softmax - onehot) * scale / rows, which may be written over the logits
// (dlogits == logits). Returns the loss times scale.
template <typename T>
double CrossEntropy(const T* logits, const int64_t* labels, int64_t rows, int64_t classes, T scale,
                    T* dlogits);

// Mean squared error over all rows*out elements (torch.nn.MSELoss's default), with
// dpred = 2 (pred - target) * scale / (rows*out), which may be written over pred. Returns
// the loss times scale.
template <typename T>
double MeanSquaredError(const T* pred, const T* target, int64_t rows, int64_t out, T scale,
                        T* dpred);

}  // namespace shardwise::cpu

#endif  // SHARDWISE_WORKER_COMPUTE_CPU_LOSSES_H_
