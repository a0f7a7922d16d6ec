#include "worker/fsdp/shard_assembler.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace shardwise::fsdp {

ShardAssembler::ShardAssembler(const FlatLayout& layout, const ShardingPlan& plan)
    : layout_(layout), shard_rank_(plan.shard_rank), taken_(layout.model.params.size(), false) {
  for (size_t p = 0; p < layout.model.params.size(); ++p) {
    param_of_name_[layout.model.params[p].name] = static_cast<int>(p);
  }
  for (const UnitLayout& unit : layout.units) {
    shards_.emplace_back(PaddedNumel(unit.numel, plan.shard_size) / plan.shard_size, 0.0f);
  }
}

absl::Status ShardAssembler::Lacks(int param) const {
  const ParameterDesc& desc = layout_.model.params[param];
  return absl::InvalidArgumentError(
      absl::StrCat("initial weights lack F32 '", desc.name, "' with ", desc.numel(), " elements"));
}

absl::Status ShardAssembler::Take(const std::string& name, const HostTensor& tensor) {
  const auto found = param_of_name_.find(name);
  if (found == param_of_name_.end()) return absl::OkStatus();
  const int p = found->second;
  const int64_t numel = layout_.model.params[p].numel();
  if (tensor.dtype != "F32" || tensor.numel() != numel) return Lacks(p);
  const ParameterSlot& slot = layout_.slots[p];
  std::vector<float>& shard = shards_[slot.unit];
  // The parameter's elements [begin, end) in its unit's flat buffer, against this shard's.
  const int64_t shard_begin = shard_rank_ * static_cast<int64_t>(shard.size());
  const int64_t begin = std::max(slot.offset, shard_begin);
  const int64_t end =
      std::min(slot.offset + numel, shard_begin + static_cast<int64_t>(shard.size()));
  if (begin < end) {
    std::memcpy(shard.data() + (begin - shard_begin), tensor.f32() + (begin - slot.offset),
                (end - begin) * sizeof(float));
  }
  taken_[p] = true;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<float>>> ShardAssembler::Finish() && {
  const auto missing = std::find(taken_.begin(), taken_.end(), false);
  if (missing != taken_.end()) return Lacks(static_cast<int>(missing - taken_.begin()));
  return std::move(shards_);
}

}  // namespace shardwise::fsdp
