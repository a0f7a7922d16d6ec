#include "worker/compute/cpu/gemm.h"

extern "C" void openblas_set_num_threads(int num_threads);

namespace shardwise::cpu {

void SetBlasThreads(int threads) { openblas_set_num_threads(threads); }

}  // namespace shardwise::cpu
