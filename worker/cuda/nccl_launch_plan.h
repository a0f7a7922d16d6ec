#ifndef SHARDWISE_WORKER_CUDA_NCCL_LAUNCH_PLAN_H_
#define SHARDWISE_WORKER_CUDA_NCCL_LAUNCH_PLAN_H_

// Whether a CUDA rank's all-gathers and reductions may launch from two threads, each over
// an NCCL communicator of its own: a pure decision on the NCCL version loaded and the
// environment, so it builds and is tested without a GPU (nccl_launch_plan_test).
//
// NCCL's kernels wait on the device for their peers, so a rank's several communicators
// are safe together only when every rank's GPU runs their collectives in one order. The
// two threads launch in one order, the same on every rank (comm/launch_order.h); NCCL
// 2.26 and later keep that host order on the device when NCCL_LAUNCH_ORDER_IMPLICIT is 1
// (read once, as the process's first communicator is created; with a CUDA driver or
// runtime older than 12.3 NCCL keeps it by running the collectives one after another:
// safe, without their overlap). Each rank decides from its own host, so the shard group
// votes (cuda_rank_device.cc): two threads only if every rank can. An older NCCL, or the
// variable set to 0 by the operator, keeps no order across communicators: the rank then
// launches every collective from one thread over one communicator, whose collectives
// NCCL runs in order (its all-gathers no longer overlap its reductions).

#include <string>

namespace shardwise::cuda {

// NCCL_VERSION(2, 26, 0): the first NCCL with NCCL_LAUNCH_ORDER_IMPLICIT.
inline constexpr int kNcclImplicitLaunchOrderVersion = 22600;
inline constexpr char kNcclImplicitLaunchOrderVariable[] = "NCCL_LAUNCH_ORDER_IMPLICIT";

struct NcclLaunchPlan {
  bool two_threads = false;
  // Set NCCL_LAUNCH_ORDER_IMPLICIT=1 before the first communicator (it is unset).
  bool set_implicit_order = false;
  std::string description;  // for the worker's log
};

// An NCCL version as ncclGetVersion gives it (NCCL_VERSION_CODE since 2.9: major * 10000
// + minor * 100 + patch), as text: 22809 -> "2.28.9".
std::string NcclVersionText(int version);

// `nccl_version` as ncclGetVersion gives it (2.28.9: 22809); `implicit_order` the
// variable's value, null when unset.
NcclLaunchPlan PlanNcclLaunches(int nccl_version, const char* implicit_order);

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_NCCL_LAUNCH_PLAN_H_
