#include "worker/cuda/host_staged_communicator.h"

#include "common/status_macros.h"
#include "worker/cuda/cuda_status.h"

namespace shardwise::cuda {

HostStagedCommunicator::HostStagedCommunicator(Communicator* host, cudaStream_t stream)
    : host_(host), stream_(stream) {}

HostStagedCommunicator::~HostStagedCommunicator() {
  if (staging_ != nullptr) cudaFreeHost(staging_);
}

absl::Status HostStagedCommunicator::Reserve(size_t bytes) {
  if (bytes <= staging_bytes_) return absl::OkStatus();
  if (staging_ != nullptr) {
    RETURN_IF_CUDA_ERROR(cudaFreeHost(staging_));
    staging_ = nullptr;
    staging_bytes_ = 0;
  }
  RETURN_IF_CUDA_ERROR(cudaMallocHost(reinterpret_cast<void**>(&staging_), bytes));
  staging_bytes_ = bytes;
  return absl::OkStatus();
}

absl::Status HostStagedCommunicator::ToHost(void* host, const void* device, size_t bytes) {
  RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_));
  RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status HostStagedCommunicator::ToDevice(void* device, const void* host, size_t bytes) {
  RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_));
  // The staging buffer is reused by the next collective: the copy must have read it.
  RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status HostStagedCommunicator::AllGather(const void* shard, size_t shard_numel, void* out,
                                               ScalarType type) {
  const size_t shard_bytes = shard_numel * ElementSize(type);
  const size_t full_bytes = shard_bytes * size();
  RETURN_IF_ERROR(Reserve(shard_bytes + full_bytes));
  char* host_shard = staging_;
  char* host_full = staging_ + shard_bytes;
  RETURN_IF_ERROR(ToHost(host_shard, shard, shard_bytes));
  RETURN_IF_ERROR(host_->AllGather(host_shard, shard_numel, host_full, type));
  return ToDevice(out, host_full, full_bytes);
}

absl::Status HostStagedCommunicator::ReduceScatter(void* in, size_t shard_numel, void* shard,
                                                   ScalarType type) {
  const size_t shard_bytes = shard_numel * ElementSize(type);
  const size_t full_bytes = shard_bytes * size();
  RETURN_IF_ERROR(Reserve(full_bytes + shard_bytes));
  char* host_full = staging_;
  char* host_shard = staging_ + full_bytes;
  RETURN_IF_ERROR(ToHost(host_full, in, full_bytes));
  RETURN_IF_ERROR(host_->ReduceScatter(host_full, shard_numel, host_shard, type));
  return ToDevice(shard, host_shard, shard_bytes);
}

absl::Status HostStagedCommunicator::AllReduce(void* data, size_t numel, ScalarType type) {
  const size_t bytes = numel * ElementSize(type);
  RETURN_IF_ERROR(Reserve(bytes));
  RETURN_IF_ERROR(ToHost(staging_, data, bytes));
  RETURN_IF_ERROR(host_->AllReduce(staging_, numel, type));
  return ToDevice(data, staging_, bytes);
}

absl::Status HostStagedCommunicator::Broadcast(void* data, size_t numel, int root,
                                               ScalarType type) {
  const size_t bytes = numel * ElementSize(type);
  RETURN_IF_ERROR(Reserve(bytes));
  if (rank() == root) RETURN_IF_ERROR(ToHost(staging_, data, bytes));
  RETURN_IF_ERROR(host_->Broadcast(staging_, numel, root, type));
  return ToDevice(data, staging_, bytes);
}

}  // namespace shardwise::cuda
