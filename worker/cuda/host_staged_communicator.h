#ifndef SHARDWISE_WORKER_CUDA_HOST_STAGED_COMMUNICATOR_H_
#define SHARDWISE_WORKER_CUDA_HOST_STAGED_COMMUNICATOR_H_

// Collectives on device buffers through a host communicator (Gloo over TCP): each
// collective copies its input to pinned host memory, runs on the host, and copies the
// result back, in the order of `stream`. For CUDA clusters without NCCL's transports, and
// so that several ranks can share one GPU (NCCL refuses two ranks on one device): the
// tests run the FSDP runtime's collectives this way with 2 ranks on one GPU.
//
// It is slower than NCCL by two PCIe copies and a stream synchronisation per collective.
// Its traffic is counted once, by the host communicator (stats() here stay zero).
//
// Thread-safety: one collective at a time (as Communicator).

#include <cuda_runtime_api.h>

#include <memory>

#include "worker/comm/communicator.h"

namespace shardwise::cuda {

class HostStagedCommunicator final : public Communicator {
 public:
  // `host` (not owned) must outlive this communicator.
  HostStagedCommunicator(Communicator* host, cudaStream_t stream);
  ~HostStagedCommunicator() override;

  using Communicator::AllGather;
  using Communicator::AllReduce;
  using Communicator::Broadcast;
  using Communicator::ReduceScatter;

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  absl::Status AllGather(const void* shard, size_t shard_numel, void* out,
                         ScalarType type) override;
  absl::Status ReduceScatter(void* in, size_t shard_numel, void* shard, ScalarType type) override;
  absl::Status AllReduce(void* data, size_t numel, ScalarType type) override;
  absl::Status Broadcast(void* data, size_t numel, int root, ScalarType type) override;
  absl::Status Barrier() override { return host_->Barrier(); }
  void SetTimeout(std::chrono::milliseconds timeout) override { host_->SetTimeout(timeout); }

 private:
  // Pinned staging space of at least `bytes` (grown, never shrunk); collectives with
  // separate input and output use two parts of it.
  absl::Status Reserve(size_t bytes);
  absl::Status ToHost(void* host, const void* device, size_t bytes);
  absl::Status ToDevice(void* device, const void* host, size_t bytes);

  Communicator* const host_;
  const cudaStream_t stream_;
  char* staging_ = nullptr;
  size_t staging_bytes_ = 0;
};

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_HOST_STAGED_COMMUNICATOR_H_
