#include "worker/compute/cpu/blas_kernels.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/self_restart.h"

extern "C" char* openblas_get_corename(void);

namespace shardwise::cpu {
namespace {

struct Core {
  const char* name;  // lower case
  VectorIsa isa;
};

// OpenBLAS 0.3.21's x86-64 cores (driver/others/dynamic.c's names) by the instructions
// their kernels use. Bulldozer's descendants have FMA but OpenBLAS runs AVX kernels on
// them; Excavator and Zen, AVX2 ones. Cooperlake adds BF16 GEMMs to SkylakeX's, which
// the float and double GEMMs here do not use.
constexpr Core kCores[] = {
    {"katmai", VectorIsa::kSse},        {"coppermine", VectorIsa::kSse},
    {"northwood", VectorIsa::kSse},     {"prescott", VectorIsa::kSse},
    {"banias", VectorIsa::kSse},        {"atom", VectorIsa::kSse},
    {"core2", VectorIsa::kSse},         {"penryn", VectorIsa::kSse},
    {"dunnington", VectorIsa::kSse},    {"nehalem", VectorIsa::kSse},
    {"athlon", VectorIsa::kSse},        {"opteron", VectorIsa::kSse},
    {"opteron_sse3", VectorIsa::kSse},  {"barcelona", VectorIsa::kSse},
    {"nano", VectorIsa::kSse},          {"bobcat", VectorIsa::kSse},
    {"sandybridge", VectorIsa::kAvx},   {"bulldozer", VectorIsa::kAvx},
    {"piledriver", VectorIsa::kAvx},    {"steamroller", VectorIsa::kAvx},
    {"haswell", VectorIsa::kAvx2},      {"excavator", VectorIsa::kAvx2},
    {"zen", VectorIsa::kAvx2},          {"skylakex", VectorIsa::kAvx512},
    {"cooperlake", VectorIsa::kAvx512}, {"sapphirerapids", VectorIsa::kAvx512},
};

// The core OpenBLAS 0.3.21 has for each step, as its $OPENBLAS_CORETYPE names it (that
// does not take "Cooperlake").
const char* CoreFor(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::kSse:
      return "Prescott";
    case VectorIsa::kAvx:
      return "Sandybridge";
    case VectorIsa::kAvx2:
      return "Haswell";
    case VectorIsa::kAvx512:
      return "SkylakeX";
  }
  return "Prescott";
}

}  // namespace

absl::string_view VectorIsaName(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::kSse:
      return "SSE only";
    case VectorIsa::kAvx:
      return "AVX";
    case VectorIsa::kAvx2:
      return "AVX2";
    case VectorIsa::kAvx512:
      return "AVX-512";
  }
  return "unknown";
}

VectorIsa DetectVectorIsa() {
#if defined(__x86_64__)
  // libgcc's answers include the operating system's consent (XCR0) to the wider registers.
  __builtin_cpu_init();
  // SkylakeX's kernels use F, CD, BW, DQ and VL.
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl")) {
    return VectorIsa::kAvx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return VectorIsa::kAvx2;
  if (__builtin_cpu_supports("avx")) return VectorIsa::kAvx;
#endif
  return VectorIsa::kSse;
}

std::string BlasCoreName() {
  const char* name = openblas_get_corename();
  return name == nullptr ? "" : name;
}

std::optional<VectorIsa> BlasCoreIsa(absl::string_view core) {
  const std::string lower = absl::AsciiStrToLower(core);
  for (const Core& known : kCores) {
    if (lower == known.name) return known.isa;
  }
  return std::nullopt;
}

std::optional<std::string> BlasCoreToForce(absl::string_view chosen, VectorIsa cpu) {
  const std::optional<VectorIsa> isa = BlasCoreIsa(chosen);
  if (!isa.has_value() || *isa >= cpu) return std::nullopt;
  return std::string(CoreFor(cpu));
}

std::string BlasCoreUpgrade::Describe() const {
  return absl::StrCat("OpenBLAS chose its ", chosen, " kernels on a CPU with ", VectorIsaName(cpu),
                      " (a CPU model newer than this OpenBLAS knows); running again with "
                      "OPENBLAS_CORETYPE=",
                      forced, " (set OPENBLAS_CORETYPE to choose otherwise)");
}

std::optional<BlasCoreUpgrade> BlasCoreUpgradeHere() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return std::nullopt;
  // Without /proc the program cannot run itself again: slower kernels, not a failed start.
  if (::access("/proc/self/exe", X_OK) != 0) return std::nullopt;
  BlasCoreUpgrade upgrade;
  upgrade.chosen = BlasCoreName();
  upgrade.cpu = DetectVectorIsa();
  std::optional<std::string> forced = BlasCoreToForce(upgrade.chosen, upgrade.cpu);
  if (!forced.has_value()) return std::nullopt;
  upgrade.forced = *std::move(forced);
  return upgrade;
}

void RestartWithBlasCore(const BlasCoreUpgrade& upgrade, char** argv) {
  ::setenv("OPENBLAS_CORETYPE", upgrade.forced.c_str(), /*overwrite=*/1);
  RestartProcess(argv);
}

void RestartOnBetterBlasKernels(char** argv) {
  const std::optional<BlasCoreUpgrade> upgrade = BlasCoreUpgradeHere();
  if (!upgrade.has_value()) return;
  std::fprintf(stderr, "%s\n", upgrade->Describe().c_str());
  RestartWithBlasCore(*upgrade, argv);
}

}  // namespace shardwise::cpu
