#include "worker/cuda/nccl_launch_plan.h"

#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace shardwise::cuda {

std::string NcclVersionText(int version) {
  return absl::StrCat(version / 10000, ".", version % 10000 / 100, ".", version % 100);
}

NcclLaunchPlan PlanNcclLaunches(int nccl_version, const char* implicit_order) {
  NcclLaunchPlan plan;
  const std::string nccl = absl::StrCat("NCCL ", NcclVersionText(nccl_version));
  constexpr char kOneThread[] =
      ": all-gathers and reductions launch from one thread over one communicator (they do "
      "not overlap)";
  if (nccl_version < kNcclImplicitLaunchOrderVersion) {
    plan.description = absl::StrCat(nccl, " keeps no launch order across communicators (",
                                    kNcclImplicitLaunchOrderVariable, " needs 2.26)", kOneThread);
    return plan;
  }
  int64_t value = 1;
  if (implicit_order != nullptr && !absl::SimpleAtoi(implicit_order, &value)) value = 0;
  if (value == 0) {
    plan.description = absl::StrCat(nccl, " with ", kNcclImplicitLaunchOrderVariable, "='",
                                    implicit_order, "' (set outside)", kOneThread);
    return plan;
  }
  plan.two_threads = true;
  plan.set_implicit_order = implicit_order == nullptr;
  plan.description =
      absl::StrCat(nccl, " with ", kNcclImplicitLaunchOrderVariable, "=",
                   implicit_order != nullptr ? implicit_order : "1",
                   ": all-gathers and reductions launch from two threads in one order");
  return plan;
}

}  // namespace shardwise::cuda
