#include "contracts/memory_estimate.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "contracts/cuda_attention_rows.h"
#include "contracts/cudnn_attention_workspace.h"
#include "contracts/fsdp_layout.h"
#include "contracts/job_ranks.h"
#include "contracts/transformer_config.h"

namespace shardwise {
namespace {

// Sizes are computed in doubles (an estimate needs no more precision) and saturated, so
// that no spec, however large, overflows.
int64_t Saturate(double bytes) {
  constexpr double kMax = static_cast<double>(std::numeric_limits<int64_t>::max());
  if (!(bytes < kMax)) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(std::max(bytes, 0.0));
}

bool IsLowPrecision(v1::Dtype dtype) { return dtype == v1::FP16 || dtype == v1::BF16; }

// Elements of the layout's units as this rank holds them: its shards, all units gathered,
// the root gathered, and the largest child gathered.
struct UnitElements {
  double shard = 0, full = 0, root = 0, largest_child = 0;
};

UnitElements CountUnitElements(const fsdp::FlatLayout& layout, int shard_size) {
  UnitElements e;
  for (const fsdp::UnitLayout& unit : layout.units) {
    const double padded = static_cast<double>(fsdp::PaddedNumel(unit.numel, shard_size));
    e.shard += padded / shard_size;
    e.full += padded;
    if (unit.is_root) {
      e.root = padded;
    } else {
      e.largest_child = std::max(e.largest_child, padded);
    }
  }
  return e;
}

// Units gathered at once besides the root while a reshard-after-forward strategy
// computes: the one computing, and with prefetch the next one.
int UnitsInFlight(const v1::FsdpConfig& fsdp) {
  const bool prefetch =
      fsdp.forward_prefetch() || fsdp.backward_prefetch() != v1::BackwardPrefetch::NONE;
  return prefetch ? 2 : 1;
}

// The FP32 shards, and the units gathered at once, stored in `stored` bytes an element
// (StoredElementBytes). With mixed precision in FP32 storage the gathered 16-bit values
// are widened (exactly) for the GEMMs: while a unit's all-gather runs, the 16-bit copy of
// its shard and the 16-bit gathered values live besides (one unit at a time: the
// all-gathers run in order). In 16-bit storage the all-gather's output is the unsharded
// unit: only the shard's 16-bit copy lives besides. NO_SHARD keeps a copy rounded to
// param_dtype beside the FP32 parameters, in the storage type.
double ParameterBytes(const v1::JobSpec& spec, const fsdp::ShardingPlan& plan,
                      const UnitElements& e, double stored) {
  const bool low = IsLowPrecision(spec.fsdp().mixed_precision().param_dtype());
  if (!plan.sharded()) return (low ? 4 + stored : 4) * e.full;
  const double shard_size = std::max(1, plan.shard_size);
  // The 16-bit copies beside a gathered unit of `padded` elements while it gathers.
  const auto in_gather = [&](double padded) {
    if (!low) return 0.0;
    return 2 * padded / shard_size + (stored == 4 ? 2 * padded : 0.0);
  };
  double gathered;
  if (plan.reshard_after_forward) {
    // The root is gathered first, alone; each block then gathers while the root and the
    // blocks in flight before it are held.
    const double in_flight = UnitsInFlight(spec.fsdp());
    gathered =
        std::max(stored * e.root + in_gather(e.root),
                 stored * (e.root + in_flight * e.largest_child) + in_gather(e.largest_child));
  } else {
    gathered = stored * e.full + in_gather(std::max(e.root, e.largest_child));
  }
  return 4 * e.shard + gathered;
}

double OptimizerBytes(const v1::OptimizerSpec& optimizer, const UnitElements& e) {
  if (optimizer.has_adamw()) return 8 * e.shard;  // exp_avg and exp_avg_sq
  if (optimizer.sgd().momentum() != 0) return 4 * e.shard;
  return 0;
}

// Per micro-batch: the rows (MLP) or sequences (GPT) one rank computes at once.
double MicroBatch(const v1::JobSpec& spec) {
  const double ranks = JobRanks(spec);
  const double steps = std::max(1, spec.gradient_accumulation_steps());
  return static_cast<double>(spec.global_batch_size()) / (ranks * steps);
}

// What a transformer's activations are made of, per row (token position) of a block and
// around the blocks, for TransformerActivationBytes.
struct TransformerShape {
  double c = 0, t = 0, v = 0, layers = 0, heads = 0, attention_width = 0;
  int64_t head_dim = 0;
  double qkv_width = 0;  // per row: q, k and v as the attention reads them
  bool fused = false;
  bool qkv_apart = false;      // the Llama's FUSED attention: q, k and v not packed
  double kv_heads = 0;         // K/V heads: the query heads', or fewer (grouped)
  double block_floats = 0;     // kept per row by a block for its backward
  double norm_stats = 0;       // per row: the block's norms' statistics
  double backward_floats = 0;  // per row: a block backward's working set beside them
  double tables = 0;           // floats held for the whole step (rotary tables)
};

// A GPT block keeps, per row, 16 C values for its backward (its input, ln_1, q/k/v, the
// attention output, the residual, ln_2, the MLP's 4C hidden before and after GELU), in the
// storage type, and its two LayerNorms' mean and 1/std (4 floats). Its backward's working
// set: the gradient coming in (C) and the MLP's hidden gradient (4C). The "floats" of
// TransformerShape count elements; their bytes are the storage's (StoredElementBytes).
TransformerShape GptShape(const v1::GptConfig& gpt) {
  TransformerShape shape;
  shape.c = gpt.n_embd(), shape.t = gpt.block_size(), shape.v = gpt.vocab_size();
  shape.layers = gpt.n_layer(), shape.heads = gpt.n_head(), shape.attention_width = gpt.n_embd();
  shape.kv_heads = shape.heads;
  shape.head_dim = gpt.n_head() > 0 ? gpt.n_embd() / gpt.n_head() : 0;
  shape.qkv_width = 3 * shape.c;
  shape.fused = gpt.attention() == v1::GptConfig::FUSED;
  shape.block_floats = 16 * shape.c;
  shape.norm_stats = 4;
  shape.backward_floats = 5 * shape.c;
  return shape;
}

// A Llama block (worker/model/llama_block.h) keeps, per row, its input, both RMSNorms'
// outputs and the residual (4 C), q, k and v (FUSED: apart, A + 2 K with A = heads x
// head_dim and K = kv_heads x head_dim; MATERIALIZED: packed with K and V repeated to the
// query heads, 3 A) and the attention output (A), the MLP's gate, up, SiLU(gate) and their
// product (4 F), and the norms' 1/rms (2). Its backward holds the most at its
// start, beside every record: the gradient coming in (C) and the MLP's hidden gradient (F);
// by the attention's backward the MLP's records are freed. The rotary tables (cos and sin,
// block_size x head_dim / 2 each) live beside.
TransformerShape LlamaShape(const v1::LlamaConfig& given) {
  const v1::LlamaConfig llama = WithLlamaDefaults(given);
  TransformerShape shape;
  shape.c = llama.hidden_size(), shape.t = llama.block_size(), shape.v = llama.vocab_size();
  shape.layers = llama.num_hidden_layers(), shape.heads = llama.num_attention_heads();
  shape.attention_width = shape.heads * llama.head_dim();
  shape.head_dim = llama.head_dim();
  shape.fused = llama.attention() == v1::GptConfig::FUSED;
  const double a = shape.attention_width, f = llama.intermediate_size();
  const double kv_width = static_cast<double>(llama.num_key_value_heads()) * llama.head_dim();
  shape.qkv_apart = shape.fused;
  shape.kv_heads = llama.num_key_value_heads();
  shape.qkv_width = shape.qkv_apart ? a + 2 * kv_width : 3 * a;
  shape.block_floats = 4 * shape.c + shape.qkv_width + a + 4 * f;
  shape.norm_stats = 2;
  shape.backward_floats = shape.c + f;
  shape.tables = shape.t * llama.head_dim();
  return shape;
}

// Whether a FUSED attention may run through cuDNN (worker/cuda/cudnn_fused_attention.h):
// on CUDA with 16-bit operands, unless the job asks for the CUDA-core kernel. Where cuDNN
// then cannot run the shape, the CUDA-core kernel needs less: the bound still holds.
bool MayRunCudnnAttention(const v1::JobSpec& spec) {
  const v1::Dtype low = spec.fsdp().mixed_precision().param_dtype();
  return spec.device() == v1::CUDA && (low == v1::BF16 || low == v1::FP16) &&
         spec.cuda().fused_attention_kernel() != v1::CudaOptions::CUDA_CORES;
}

// What cuDNN's backward borrows per call for `sequences` sequences
// (contracts/cudnn_attention_workspace.h): the deterministic one's workspace, quadratic in
// the context, or the atomic one's (cuda.attention_backward ATOMIC), linear.
double CudnnBackwardScratchBytes(const v1::JobSpec& spec, const TransformerShape& shape,
                                 double sequences) {
  // Past what any device holds the exact sizes (int64) could overflow: a bound in doubles
  // above either, which no budget admits, stands for them.
  const double rounded_seq = shape.t + 128.0;
  const double bound = sequences * shape.heads *
                       (2.0 * rounded_seq * rounded_seq + 12.0 * rounded_seq * shape.head_dim);
  if (!(bound < 1e18)) return bound;
  const auto batch = static_cast<int64_t>(sequences), heads = static_cast<int64_t>(shape.heads),
             kv_heads = static_cast<int64_t>(shape.kv_heads), seq = static_cast<int64_t>(shape.t);
  if (spec.cuda().attention_backward() == v1::CudaOptions::ATOMIC) {
    return static_cast<double>(
        CudnnAttentionAtomicBackwardBytes(batch, heads, kv_heads, seq, shape.head_dim) +
        2 * kCudnnWorkspaceAlignmentBytes);
  }
  return static_cast<double>(
      CudnnAttentionBackwardWorkspaceBytes(batch, heads, kv_heads, seq, shape.head_dim) +
      kCudnnWorkspaceAlignmentBytes);
}

// A FUSED attention's backward on CUDA adds the larger of what its two kernels hold for
// `sequences` sequences. cuDNN: in FP32 storage its 16-bit copies of q/k/v, out, dout and
// the q/k/v gradient (2 x qkv_width + 2 A per row, 2 bytes each; 16-bit storage binds the
// tensors themselves), and its backward's scratch (CudnnBackwardScratchBytes, which
// cuDNN's own plans are checked against). The CUDA-core kernel, which reads q, k and v packed: in
// 16-bit storage at head sizes without register rows (contracts/cuda_attention_rows.h) the FP32
// copies of q/k/v, out, dout and the q/k/v gradient (compute/float_views.h); with q, k and v apart
// their packing (3 A, in the type the kernel reads) and their gradients' (3 A, FP32 until each
// group's sum). Either may run where cuDNN is allowed (it falls back where cuDNN cannot
// build the shape).
double CudaFusedAttentionBytes(const v1::JobSpec& spec, const TransformerShape& shape,
                               double stored, double sequences) {
  const double a = shape.attention_width, rows = sequences * shape.t;
  double cudnn = 0;
  if (MayRunCudnnAttention(spec)) {
    const double copies = stored == 4 ? 2 * (2 * shape.qkv_width + 2 * a) : 0;
    cudnn = copies * rows + CudnnBackwardScratchBytes(spec, shape, sequences);
  }
  const bool widens = stored != 4 && !CudaAttentionHasRegisterRows(shape.head_dim);
  const double widened = widens ? 4 * (2 * shape.qkv_width + 2 * a) : 0;
  const double packing = shape.qkv_apart ? (widens ? 4 : stored) * 3 * a + 4 * 3 * a : 0;
  return std::max(cudnn, (widened + packing) * rows);
}

// Every block's record (with checkpointing, only its input, plus the rest of one block's
// during its recompute, whose record holds that same input) and the softmax's: with MATERIALIZED
// attention the probabilities, heads x T x T per sequence, with FUSED each row's log-sum-exp, heads
// x T. Around the blocks: the embeddings' output and the final norm's output (C each) and
// statistics, the logits, which their gradient overwrites (model/loss.cc), and the head
// backward's working set beside them (V each: on CUDA its 16-bit copies), and the batch's tokens,
// positions and labels (INT64 each). An attention backward holds working space beside them: the
// fused one each row's dout . out (heads x T per sequence) and the attention output, which the
// materialised one frees before its backward and the fused one reads; on CUDA the materialised one
// the whole micro-batch's score gradients at once (the CPU's go one head at a time) and, with
// 16-bit operands, 16-bit copies of them and of the probabilities (cuda/attention.h), and
// the fused one its kernel's scratch (CudaFusedAttentionBytes).
double TransformerActivationBytes(const v1::JobSpec& spec, const TransformerShape& shape,
                                  double sequences, double stored) {
  const double rows = sequences * shape.t;
  const double row_stats = shape.heads * shape.t * sequences;
  const double scores = shape.fused ? row_stats : row_stats * shape.t;
  const double per_block =
      stored * shape.block_floats * rows + 4 * (shape.norm_stats * rows + scores);
  const double blocks = spec.activation_checkpointing()
                            ? (shape.layers - 1) * stored * shape.c * rows + per_block
                            : shape.layers * per_block;
  double attention_backward = 0;
  if (shape.fused) {
    attention_backward = 4 * row_stats + stored * shape.attention_width * rows;
    if (spec.device() == v1::CUDA)
      attention_backward += CudaFusedAttentionBytes(spec, shape, stored, sequences);
  } else if (spec.device() == v1::CUDA) {
    const v1::Dtype low = spec.fsdp().mixed_precision().param_dtype();
    const bool narrow = low == v1::BF16 || low == v1::FP16;
    attention_backward = (4 + (narrow ? 2 + 2 : 0)) * scores;
  }
  // Beside the blocks' records, the most held at once is the head's at the end of the
  // forward, or a block's backward working set, which outweighs the head's when V is small.
  const double head = rows * (stored * (2 * shape.c + 2 * shape.v) + 4 * shape.norm_stats / 2);
  const double block_backward = stored * rows * shape.backward_floats;
  // The batch on the device (tokens, positions and labels, INT64) counts here too.
  const double batch = 3 * 8 * rows;
  return blocks + attention_backward + std::max(head, block_backward) + batch + 4 * shape.tables;
}

// An MLP keeps the input and, per Linear, its output before and after the activation,
// plus the loss's gradient (all in the storage type) and the batch's labels (INT64) or,
// with MSE, targets (FP32).
double MlpActivationBytes(const v1::JobSpec& spec, double rows, double stored) {
  const auto& widths = spec.model().layer_widths();
  const double out = widths.empty() ? 0 : widths[widths.size() - 1];
  double values = widths.empty() ? 0 : widths[0] + out;
  for (int k = 1; k < widths.size(); ++k) values += 2.0 * widths[k];
  return rows * (stored * values + (spec.loss() == v1::MSE ? 4 * out : 8));
}

// The CPU attention kernels' own working space, outside the device's tensors: the
// materialised backward's score gradients of one head (T x T floats, cpu/attention.cc);
// the fused one's, kept per thread for the forward and for the backward
// (cpu/fused_attention.cc): its blocks (3 x 64 x 512 floats, a tile's running max and
// sum, 2 x 64, and its output, 64 x head_dim) and each pass's copies of one head's
// operands (T x head_dim panels, 1 for the forward and 6 for the backward: q, k, dout and
// the sums of dq and of a grouped head's dk and dv; and transposes of head_dim x (T + 32),
// 1 and 2).
// fused_attention_test checks this against FusedAttentionScratchFloats.
double TransformerScratchBytes(const v1::JobSpec& spec, const TransformerShape& shape) {
  if (spec.device() == v1::CUDA) return 0;
  if (!shape.fused) return 4 * shape.t * shape.t;
  const double head_dim = shape.attention_width / shape.heads;
  return 4 *
         (3 * 64 * 512 + 2 * 64 + 64 * head_dim + (7 * shape.t + 3 * (shape.t + 32)) * head_dim);
}

double ActivationBytes(const v1::JobSpec& spec, double micro_batch, double stored) {
  const v1::ModelSpec& model = spec.model();
  if (model.has_gpt()) {
    return TransformerActivationBytes(spec, GptShape(model.gpt()), micro_batch, stored);
  }
  if (model.has_llama()) {
    return TransformerActivationBytes(spec, LlamaShape(model.llama()), micro_batch, stored);
  }
  return MlpActivationBytes(spec, micro_batch, stored);
}

// The losses that wait on the device to be read (one FP64 per micro-step, for up to
// loss_read_interval_steps steps).
double PendingLossBytes(const v1::JobSpec& spec) {
  return 8.0 * std::max(1, spec.loss_read_interval_steps()) *
         std::max(1, spec.gradient_accumulation_steps());
}

double DataBytes(const v1::JobSpec& spec, double micro_batch, int64_t data_file_bytes) {
  const v1::DataSpec& data = spec.data();
  if (data.has_tokens()) return 2 * 8 * micro_batch * BlockSize(spec.model());
  if (data.has_synthetic()) {
    const auto& widths = spec.model().layer_widths();
    const double row = widths.empty() ? 0 : widths[0] + widths[widths.size() - 1];
    return 4 * row * static_cast<double>(data.synthetic().num_samples());
  }
  return static_cast<double>(data_file_bytes);
}

}  // namespace

int64_t MemoryEstimate::total() const {
  return Saturate(static_cast<double>(parameters) + gradients + optimizer_state + activations +
                  data);
}

std::string MemoryEstimate::ToString() const { return DescribeMemoryEstimate(ToProto()); }

v1::MemoryEstimate MemoryEstimate::ToProto() const {
  v1::MemoryEstimate proto;
  proto.set_parameters_bytes(parameters);
  proto.set_gradients_bytes(gradients);
  proto.set_optimizer_state_bytes(optimizer_state);
  proto.set_activations_bytes(activations);
  proto.set_data_bytes(data);
  proto.set_total_bytes(total());
  return proto;
}

std::string DescribeMemoryEstimate(const v1::MemoryEstimate& e) {
  return absl::StrCat(
      FormatBytes(e.total_bytes()), " (parameters ", FormatBytes(e.parameters_bytes()),
      ", gradients ", FormatBytes(e.gradients_bytes()), ", optimizer state ",
      FormatBytes(e.optimizer_state_bytes()), ", activations ", FormatBytes(e.activations_bytes()),
      ", data ", FormatBytes(e.data_bytes()), ")");
}

int64_t KernelScratchBytes(const v1::JobSpec& spec) {
  const v1::ModelSpec& model = spec.model();
  if (model.has_gpt()) return Saturate(TransformerScratchBytes(spec, GptShape(model.gpt())));
  if (model.has_llama()) {
    return Saturate(TransformerScratchBytes(spec, LlamaShape(model.llama())));
  }
  return 0;
}

std::string FormatBytes(int64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1024 && unit < 5) value /= 1024, ++unit;
  return absl::StrFormat("%.1f %s", value, units[unit]);
}

int StoredElementBytes(const v1::JobSpec& spec) {
  const bool sixteen_bit = IsLowPrecision(spec.fsdp().mixed_precision().param_dtype());
  const bool stores_param_dtype =
      spec.device() == v1::CUDA && spec.cuda().storage() == v1::CudaOptions::STORAGE_PARAM_DTYPE;
  return sixteen_bit && stores_param_dtype ? 2 : 4;
}

absl::StatusOr<MemoryEstimate> EstimateRankMemory(const v1::JobSpec& spec,
                                                  int64_t data_file_bytes) {
  ASSIGN_OR_RETURN(const fsdp::FlatLayout layout, fsdp::BuildFlatLayout(spec.model(), spec.wrap()));
  ASSIGN_OR_RETURN(const fsdp::ShardingPlan plan,
                   fsdp::PlanSharding(spec.fsdp(), std::max(1, spec.world_size()), 0));
  const UnitElements e = CountUnitElements(layout, plan.shard_size);
  const double micro_batch = MicroBatch(spec);
  const double stored = StoredElementBytes(spec);

  MemoryEstimate estimate;
  estimate.parameters = Saturate(ParameterBytes(spec, plan, e, stored));
  // The reduced (sharded) gradients, and the unsharded ones of the root, of the unit
  // computing its backward and of the one whose reduction runs meanwhile. With gradient
  // accumulation every unit's unsharded gradients live from the first micro-step to the
  // last one's reduction (no_sync, as PyTorch's).
  const bool accumulates = spec.gradient_accumulation_steps() > 1;
  estimate.gradients =
      Saturate(4 * (e.shard + (accumulates ? e.full : e.root + 2 * e.largest_child)));
  estimate.optimizer_state = Saturate(OptimizerBytes(spec.optimizer(), e));
  estimate.activations =
      Saturate(ActivationBytes(spec, micro_batch, stored) + PendingLossBytes(spec) +
               static_cast<double>(KernelScratchBytes(spec)));
  estimate.data = Saturate(DataBytes(spec, micro_batch, data_file_bytes));
  return estimate;
}

}  // namespace shardwise
