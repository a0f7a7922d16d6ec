#include "worker/compute/cpu/blas_kernels.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

namespace shardwise::cpu {
namespace {

TEST(BlasKernels, AnSse3FallbackOnAnAvx512CpuIsReplacedByTheAvx512Kernels) {
  // Debian 12's OpenBLAS 0.3.21 on an Emerald Rapids Xeon.
  EXPECT_EQ(BlasCoreToForce("Prescott", VectorIsa::kAvx512), "SkylakeX");
  EXPECT_EQ(BlasCoreToForce("Sandybridge", VectorIsa::kAvx2), "Haswell");
  EXPECT_EQ(BlasCoreToForce("Haswell", VectorIsa::kAvx512), "SkylakeX");
}

TEST(BlasKernels, KernelsAsWideAsTheCpuAreKept) {
  EXPECT_EQ(BlasCoreToForce("Cooperlake", VectorIsa::kAvx512), std::nullopt);
  // Zen's tuning is OpenBLAS's own for that CPU: not traded for Haswell's.
  EXPECT_EQ(BlasCoreToForce("Zen", VectorIsa::kAvx2), std::nullopt);
  EXPECT_EQ(BlasCoreToForce("Prescott", VectorIsa::kSse), std::nullopt);
  // Wider than the CPU cannot happen (OpenBLAS checks), but is not narrowed either.
  EXPECT_EQ(BlasCoreToForce("SkylakeX", VectorIsa::kAvx2), std::nullopt);
}

TEST(BlasKernels, AnUnknownCoreNameIsTrusted) {
  // A newer library's name for a newer CPU.
  EXPECT_EQ(BlasCoreIsa("GraniteRapids"), std::nullopt);
  EXPECT_EQ(BlasCoreToForce("GraniteRapids", VectorIsa::kAvx512), std::nullopt);
  EXPECT_EQ(BlasCoreToForce("", VectorIsa::kAvx512), std::nullopt);
}

TEST(BlasKernels, CoreNamesAreMatchedWithoutCase) {
  EXPECT_EQ(BlasCoreIsa("SKYLAKEX"), VectorIsa::kAvx512);
  EXPECT_EQ(BlasCoreIsa("prescott"), VectorIsa::kSse);
}

TEST(BlasKernels, TheUpgradeSaysWhatAndHowToOverrideIt) {
  const BlasCoreUpgrade upgrade{"Prescott", "SkylakeX", VectorIsa::kAvx512};
  EXPECT_EQ(upgrade.Describe(),
            "OpenBLAS chose its Prescott kernels on a CPU with AVX-512 (a CPU model newer than "
            "this OpenBLAS knows); running again with OPENBLAS_CORETYPE=SkylakeX (set "
            "OPENBLAS_CORETYPE to choose otherwise)");
}

// The probe (blas_kernels_probe.cc) restarts onto better kernels as a daemon does and
// prints "CORE OPENBLAS_CORETYPE" from the image that runs.
std::pair<std::string, std::string> RunProbe(const std::string& environment) {
  const std::string command = environment + " " + std::getenv("BLAS_KERNELS_PROBE");
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {};
  char core[64] = {0}, forced[64] = {0};
  const int read = std::fscanf(pipe, "%63s %63s", core, forced);
  ::pclose(pipe);
  if (read != 2) return {};
  return {core, forced};
}

TEST(BlasKernels, AProgramRunsOnKernelsAsWideAsItsCpu) {
  const auto [core, forced] = RunProbe("env -u OPENBLAS_CORETYPE");
  ASSERT_FALSE(core.empty());
  EXPECT_EQ(BlasCoreToForce(core, DetectVectorIsa()), std::nullopt)
      << "still on " << core << " on a CPU with " << VectorIsaName(DetectVectorIsa());
  // Restarted exactly where the library's own pick (this test's, if it chose alone) was
  // narrower than the CPU.
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr) {
    const std::optional<BlasCoreUpgrade> upgrade = BlasCoreUpgradeHere();
    EXPECT_EQ(forced, upgrade.has_value() ? upgrade->forced : "-") << BlasCoreName();
  }
}

TEST(BlasKernels, AnOperatorsChoiceIsKept) {
  const auto [core, forced] = RunProbe("OPENBLAS_CORETYPE=Prescott");
  EXPECT_EQ(core, "Prescott");
  EXPECT_EQ(forced, "Prescott");
}

}  // namespace
}  // namespace shardwise::cpu
