#include "worker/cuda/cudnn_requirements.h"

#include "absl/strings/str_cat.h"

namespace shardwise::cuda {
namespace {

constexpr int64_t kFirstVersion = 90000;
// The first version whose fused attention takes any sequence length without a padding mask.
constexpr int64_t kAnyLengthVersion = 91600;
// The first version that clears the atomic backward's dQ accumulator itself.
constexpr int64_t kAtomicBackwardVersion = 90600;
// Versions whose BF16/FP16 flash-attention kernels have known bugs (NVIDIA's frontend, and
// the libraries built on it, refuse them).
constexpr int64_t kFaultyVersions[] = {91000, 91001};

absl::Status Refused(absl::string_view why) {
  return absl::FailedPreconditionError(
      absl::StrCat("cuDNN's fused attention (attention: FUSED on CUDA) cannot run: ", why));
}

// A refusal where the job asks for cuDNN: the job fails with it.
absl::Status Insisted(const absl::Status& refused) {
  return absl::FailedPreconditionError(
      absl::StrCat(refused.message(), " (the job asks for it: cuda.fused_attention_kernel CUDNN)"));
}

// Where cuDNN runs a FUSED attention.
FusedAttentionChoice CudnnChosen(const CudnnFacts& facts) {
  return {FusedAttentionKernel::kCudnn,
          absl::StrCat("cuDNN ", CudnnVersionText(facts.version), " flash attention")};
}

}  // namespace

std::string CudnnVersionText(int64_t version) {
  // cuDNN 9 counts major * 10000 + minor * 100 + patch; cuDNN 8 major * 1000 + ...
  const int64_t major_unit = version >= kFirstVersion ? 10000 : 1000;
  return absl::StrCat(version / major_unit, ".", version % major_unit / 100, ".", version % 100);
}

absl::Status CheckCudnnVersion(int64_t version) {
  if (version >= kFirstVersion) return absl::OkStatus();
  if (version <= 0) return Refused("no cuDNN library was loaded; it needs cuDNN 9.0.0 or newer");
  return Refused(
      absl::StrCat("cuDNN ", CudnnVersionText(version), " found; it needs cuDNN 9.0.0 or newer"));
}

AttentionBackwardKind BackwardKindOf(v1::CudaOptions::AttentionBackward option) {
  return option == v1::CudaOptions::ATOMIC ? AttentionBackwardKind::kAtomic
                                           : AttentionBackwardKind::kDeterministic;
}

absl::Status CheckCudnnBackwardKind(const CudnnFacts& facts, AttentionBackwardKind backward) {
  if (backward == AttentionBackwardKind::kAtomic && facts.version < kAtomicBackwardVersion) {
    return Refused(absl::StrCat("cuDNN ", CudnnVersionText(facts.version),
                                " found, and the atomic backward (cuda.attention_backward ATOMIC) "
                                "needs cuDNN 9.6.0 or newer"));
  }
  // The deterministic graph's shape makes every kernel deterministic on Ampere and Hopper;
  // on Blackwell cuDNN's heuristics may give one of its engines a configuration that is
  // not, which only pinned engine knobs avoid (as NVIDIA's own frontend does from 9.18).
  // Unverified here, so not promised.
  if (backward == AttentionBackwardKind::kDeterministic && facts.compute_capability >= 100) {
    return Refused(absl::StrCat(
        "the GPU's compute capability is ", facts.compute_capability / 10, ".",
        facts.compute_capability % 10,
        ", where its deterministic backward is not guaranteed bit for bit; "
        "cuda.attention_backward: ATOMIC runs it (two runs may then differ in their last bits)"));
  }
  return absl::OkStatus();
}

absl::Status CheckCudnnAttention(const CudnnFacts& facts, const AttentionLayout& layout,
                                 GraphType io, AttentionBackwardKind backward) {
  if (io != GraphType::kBFloat16 && io != GraphType::kHalf) {
    return Refused(absl::StrCat("its kernels take BF16 or FP16 operands, not ", GraphTypeName(io),
                                " (an FP32 job's FUSED attention runs on CUDA cores)"));
  }
  if (absl::Status version = CheckCudnnVersion(facts.version); !version.ok()) return version;
  for (const int64_t faulty : kFaultyVersions) {
    if (facts.version != faulty) continue;
    return Refused(absl::StrCat("cuDNN ", CudnnVersionText(facts.version),
                                " found, whose BF16 and FP16 flash-attention kernels have known "
                                "bugs; cuDNN 9.10.2 or newer runs it"));
  }
  if (layout.seq < 2) {
    return Refused(
        absl::StrCat("the sequence length is ", layout.seq, "; its backward needs at least 2"));
  }
  if (facts.version < kAnyLengthVersion && layout.seq % 128 != 0) {
    return Refused(absl::StrCat("cuDNN ", CudnnVersionText(facts.version),
                                " found, whose fused attention needs a sequence length that is "
                                "a multiple of 128 (this job's is ",
                                layout.seq, "); cuDNN 9.16.0 or newer takes any"));
  }
  if (absl::Status kind = CheckCudnnBackwardKind(facts, backward); !kind.ok()) return kind;
  if (facts.compute_capability < 80) {
    return Refused(absl::StrCat("the GPU's compute capability is ", facts.compute_capability / 10,
                                ".", facts.compute_capability % 10,
                                "; it needs 8.0 (Ampere) or newer"));
  }
  const int64_t largest_head = facts.compute_capability / 10 == 9 ? 256 : 128;
  if (layout.head_dim % 8 != 0 || layout.head_dim > largest_head) {
    return Refused(absl::StrCat("the head size is ", layout.head_dim,
                                "; it must be a multiple of 8 and at most ", largest_head,
                                " on this GPU"));
  }
  if (layout.kv_heads <= 0 || layout.heads % layout.kv_heads != 0) {
    return Refused(absl::StrCat(layout.heads, " query heads are not a multiple of ",
                                layout.kv_heads, " K/V heads"));
  }
  return absl::OkStatus();
}

GraphType GraphIo(ScalarType compute) {
  switch (compute) {
    case ScalarType::kBFloat16:
      return GraphType::kBFloat16;
    case ScalarType::kFloat16:
      return GraphType::kHalf;
    default:
      return GraphType::kFloat;
  }
}

absl::StatusOr<FusedAttentionChoice> ChooseFusedAttentionKernel(
    v1::CudaOptions::FusedAttentionKernel requested, const CudnnFacts& facts,
    const AttentionLayout& layout, ScalarType operands, AttentionBackwardKind backward) {
  if (requested == v1::CudaOptions::CUDA_CORES) {
    return FusedAttentionChoice{FusedAttentionKernel::kCudaCores,
                                "the CUDA-core kernel; the job asks for it"};
  }
  const absl::Status runs = CheckCudnnAttention(facts, layout, GraphIo(operands), backward);
  if (runs.ok()) {
    return CudnnChosen(facts);
  }
  if (requested == v1::CudaOptions::CUDNN) return Insisted(runs);
  return FusedAttentionChoice{FusedAttentionKernel::kCudaCores,
                              absl::StrCat("the CUDA-core kernel; ", runs.message())};
}

absl::StatusOr<FusedAttentionChoice> ConfirmCudnnAttention(
    v1::CudaOptions::FusedAttentionKernel requested, const CudnnFacts& facts,
    const absl::Status& plans) {
  if (plans.ok()) {
    return CudnnChosen(facts);
  }
  const absl::Status refused =
      Refused(absl::StrCat("cuDNN ", CudnnVersionText(facts.version), " on compute capability ",
                           facts.compute_capability / 10, ".", facts.compute_capability % 10,
                           " could not build its plans: ", plans.message()));
  if (requested == v1::CudaOptions::CUDNN) return Insisted(refused);
  return FusedAttentionChoice{FusedAttentionKernel::kCudaCores,
                              absl::StrCat("the CUDA-core kernel; ", refused.message())};
}

}  // namespace shardwise::cuda
