#include "worker/fsdp/optimizer_ranges.h"

#include <algorithm>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"

namespace shardwise::fsdp {
namespace {

// The ranges of the whole padded flat buffer of `unit`, by parameter, merged.
std::vector<ShardRange> FlatRanges(const FlatLayout& layout, const UnitLayout& unit,
                                   int64_t padded_numel, const v1::OptimizerSpec& optimizer,
                                   const std::set<int>& stepped_in_backward) {
  const v1::OptimizerOverlap::Mode mode = optimizer.overlap().mode();
  const bool all_in_backward =
      mode == v1::OptimizerOverlap::IN_BACKWARD ||
      (mode == v1::OptimizerOverlap::HOOK_THEN_OPTIMIZER && optimizer.overlap().params().empty());
  std::vector<ShardRange> ranges;
  auto add = [&ranges](ShardRange range) {
    if (range.begin == range.end) return;
    if (!ranges.empty() && ranges.back().decay == range.decay &&
        ranges.back().in_backward == range.in_backward) {
      ranges.back().end = range.end;
    } else {
      ranges.push_back(range);
    }
  };
  for (int p : unit.params) {
    const ParameterDesc& param = layout.model.params[p];
    const int64_t begin = layout.slots[p].offset;
    add({begin, begin + param.numel(),
         optimizer.weight_decay_params() == v1::WeightDecayParams::ALL || param.is_matrix(),
         all_in_backward || stepped_in_backward.count(p) > 0});
  }
  // Padding: like what precedes it (or the whole shard's default).
  const ShardRange last = ranges.empty() ? ShardRange{0, 0, true, all_in_backward} : ranges.back();
  add({unit.numel, padded_numel, last.decay, last.in_backward});
  return ranges;
}

}  // namespace

absl::StatusOr<std::vector<std::vector<ShardRange>>> PlanOptimizerRanges(
    const FlatLayout& layout, const ShardingPlan& plan, const v1::OptimizerSpec& optimizer) {
  std::set<int> stepped_in_backward;
  if (optimizer.overlap().mode() == v1::OptimizerOverlap::HOOK_THEN_OPTIMIZER) {
    for (const std::string& name : optimizer.overlap().params()) {
      const int p = layout.model.FindParameter(name);
      if (p < 0) {
        return absl::InvalidArgumentError(absl::StrCat("job.optimizer.overlap.params: '", name,
                                                       "' is not a parameter of this model"));
      }
      stepped_in_backward.insert(p);
    }
  }
  std::vector<std::vector<ShardRange>> shards;
  for (const UnitLayout& unit : layout.units) {
    const int64_t padded = PaddedNumel(unit.numel, plan.shard_size);
    const int64_t shard_numel = padded / plan.shard_size;
    const int64_t shard_begin = plan.shard_rank * shard_numel;
    std::vector<ShardRange> shard;
    for (const ShardRange& r : FlatRanges(layout, unit, padded, optimizer, stepped_in_backward)) {
      const int64_t begin = std::max(r.begin, shard_begin);
      const int64_t end = std::min(r.end, shard_begin + shard_numel);
      if (begin < end)
        shard.push_back({begin - shard_begin, end - shard_begin, r.decay, r.in_backward});
    }
    shards.push_back(std::move(shard));
  }
  return shards;
}

}  // namespace shardwise::fsdp
