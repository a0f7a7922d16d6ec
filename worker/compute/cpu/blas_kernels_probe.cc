// For blas_kernels_test: restarts onto better OpenBLAS kernels as the daemons do, then
// prints "CORE OPENBLAS_CORETYPE" ("-" for unset) from the image that runs.

#include <cstdio>
#include <cstdlib>

#include "worker/compute/cpu/blas_kernels.h"

int main(int, char** argv) {
  shardwise::cpu::RestartOnBetterBlasKernels(argv);
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  std::printf("%s %s\n", shardwise::cpu::BlasCoreName().c_str(), forced == nullptr ? "-" : forced);
  return 0;
}
