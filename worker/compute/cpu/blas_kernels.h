#ifndef SHARDWISE_WORKER_COMPUTE_CPU_BLAS_KERNELS_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_BLAS_KERNELS_H_

// Which of OpenBLAS's kernels this process runs, and the remedy for a library older than
// its CPU.
//
// An OpenBLAS built for several CPUs (DYNAMIC_ARCH, as Debian's is) picks its kernels as
// it loads, from the CPU's family and model. A CPU newer than the library is not in its
// table and gets the "Prescott" kernels: SSE3, a quarter of an AVX-512 register. Debian
// 12's OpenBLAS 0.3.21 does this on an Emerald Rapids Xeon (family 6, model 207): a float
// GEMM of the GPT's shapes ([1024, 256] x [256, 768]) runs at 21-30 GFLOP/s there, and at
// 138-140 with the AVX-512 kernels ("SkylakeX") the same CPU runs. Every
// GEMM of a CPU rank goes through OpenBLAS, so that is most of a training step.
//
// The library reads $OPENBLAS_CORETYPE once, as it loads: the remedy is to set it and run
// the program again, which the worker daemon and the benchmarks do first thing
// (RestartOnBetterBlasKernels). A $OPENBLAS_CORETYPE already set (an operator's choice,
// or the restarted program) is left alone.

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace shardwise::cpu {

// The widest vector instructions a CPU (and its operating system) offers, in the steps
// OpenBLAS's x86-64 kernels come in.
enum class VectorIsa { kSse, kAvx, kAvx2, kAvx512 };

absl::string_view VectorIsaName(VectorIsa isa);

// This machine's.
VectorIsa DetectVectorIsa();

// The kernels OpenBLAS chose in this process, as openblas_get_corename names them
// ("Prescott", "Haswell", "SkylakeX", ...).
std::string BlasCoreName();

// The instructions OpenBLAS's core `core` is written for; nullopt for a name this table
// does not know (a newer library's), which is then trusted.
std::optional<VectorIsa> BlasCoreIsa(absl::string_view core);

// The core to force on a CPU offering `cpu` when the library chose `chosen`: the one
// written for `cpu` where `chosen` is written for less; nullopt to keep `chosen`.
std::optional<std::string> BlasCoreToForce(absl::string_view chosen, VectorIsa cpu);

// What this process would change: nullopt where $OPENBLAS_CORETYPE is set, the library
// chose kernels as wide as the CPU's, or the program cannot run itself again (no /proc).
struct BlasCoreUpgrade {
  std::string chosen;
  std::string forced;
  VectorIsa cpu;

  // "OpenBLAS chose its Prescott kernels on a CPU with AVX-512 ...", for the log.
  std::string Describe() const;
};
std::optional<BlasCoreUpgrade> BlasCoreUpgradeHere();

// Sets $OPENBLAS_CORETYPE to `upgrade.forced` and executes this program again with `argv`
// (common/self_restart.h). Call it before any thread or socket exists.
[[noreturn]] void RestartWithBlasCore(const BlasCoreUpgrade& upgrade, char** argv);

// Where BlasCoreUpgradeHere() has one, writes its description to stderr and restarts
// with it; returns otherwise. For programs without the daemons' logs: call it first thing
// in main.
void RestartOnBetterBlasKernels(char** argv);

}  // namespace shardwise::cpu

#endif  // SHARDWISE_WORKER_COMPUTE_CPU_BLAS_KERNELS_H_
