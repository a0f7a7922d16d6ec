#ifndef SHARDWISE_WORKER_CUDA_ATTENTION_GRAPH_EVALUATOR_H_
#define SHARDWISE_WORKER_CUDA_ATTENTION_GRAPH_EVALUATOR_H_

// Runs an attention_graph.h description on the CPU in double, with the meaning cuDNN's
// backend gives each operation (what the GPU runs fused): the tests' way to show that a
// description computes attention and its gradients, strides and offsets included. Types
// are not simulated (every value is a double); the tests compare with
// compute/cpu/fused_attention's double instantiation.

#include <map>

#include "absl/status/status.h"
#include "worker/cuda/attention_graph.h"

namespace shardwise::cuda {

// `buffers` gives each AttentionBuffer the graph names a double array laid out as the
// graph's strides and offsets say. Fails, naming the operation, on a tensor read before it
// is written, a buffer not given, or shapes an operation cannot take.
absl::Status EvaluateAttentionGraph(const AttentionGraph& graph,
                                    const std::map<AttentionBuffer, double*>& buffers);

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_ATTENTION_GRAPH_EVALUATOR_H_
