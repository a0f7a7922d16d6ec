#include "worker/fsdp/shard_assembler.h"

#include <algorithm>
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

ElementRange ShardAssembler::Mine(int p) const {
  const ParameterSlot& slot = layout_.slots[p];
  return ShardElements(shard_rank_, static_cast<int64_t>(shards_[slot.unit].size()));
}

ElementRange ShardAssembler::Wanted(const std::string& name, int64_t numel) const {
  const auto found = param_of_name_.find(name);
  if (found == param_of_name_.end()) return {};
  const int p = found->second;
  if (numel != layout_.model.params[p].numel()) return {};
  // The parameter's elements in its unit's flat buffer, against this rank's shard, as
  // elements of the parameter.
  const int64_t offset = layout_.slots[p].offset;
  const ElementRange kept = Intersect({offset, offset + numel}, Mine(p));
  if (kept.empty()) return {};
  return {kept.begin - offset, kept.end - offset};
}

absl::Status ShardAssembler::Take(const std::string& name, const ParameterPiece& piece) {
  const auto found = param_of_name_.find(name);
  if (found == param_of_name_.end()) return absl::OkStatus();
  const int p = found->second;
  if (piece.numel() != layout_.model.params[p].numel()) return Lacks(p);
  const ElementRange wanted = Wanted(name, piece.numel());
  const bool as_wanted = (piece.range.empty() && wanted.empty()) ||
                         (piece.range.begin == wanted.begin && piece.range.end == wanted.end);
  if (!as_wanted) {
    return absl::InternalError(absl::StrCat(
        "'", name, "': a reader gave elements [", piece.range.begin, ", ", piece.range.end,
        ") where this rank wants [", wanted.begin, ", ", wanted.end, ")"));
  }
  if (!wanted.empty()) {
    const int64_t at = layout_.slots[p].offset + wanted.begin - Mine(p).begin;
    std::copy(piece.values, piece.values + wanted.size(),
              shards_[layout_.slots[p].unit].begin() + at);
  }
  taken_[p] = true;
  return absl::OkStatus();
}

absl::Status ShardAssembler::Take(const std::string& name, const HostTensor& tensor) {
  const auto found = param_of_name_.find(name);
  if (found == param_of_name_.end()) return absl::OkStatus();
  if (tensor.dtype != "F32") return Lacks(found->second);
  const ElementRange wanted = Wanted(name, tensor.numel());
  return Take(name, PieceOfWhole(tensor.shape, wanted, tensor.f32()));
}

absl::StatusOr<std::vector<std::vector<float>>> ShardAssembler::Finish() && {
  const auto missing = std::find(taken_.begin(), taken_.end(), false);
  if (missing != taken_.end()) return Lacks(static_cast<int>(missing - taken_.begin()));
  return std::move(shards_);
}

}  // namespace shardwise::fsdp
