#ifndef SHARDWISE_WORKER_CUDA_CUDA_RANK_DEVICE_H_
#define SHARDWISE_WORKER_CUDA_CUDA_RANK_DEVICE_H_

// The RankDeviceFactory of CUDA workers (rank_device.h): a CudaDevice on the worker's GPU
// and, for each FSDP group, an NCCL communicator (the unique id through the attempt's
// rendezvous store) or, with cuda.collectives HOST_STAGED_GLOO, the group's Gloo
// communicator behind pinned host staging. While the attempt runs, a watcher aborts the
// NCCL communicators as soon as the attempt is aborted, so no collective outlives its
// job.

#include "worker/comm/rank_device.h"

namespace shardwise::cuda {

RankDeviceFactory CudaRankDevices(int gpu);

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_CUDA_RANK_DEVICE_H_
