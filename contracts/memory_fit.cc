#include "contracts/memory_fit.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "contracts/job_ranks.h"
#include "contracts/transformer_config.h"

namespace shardwise {
namespace {

// The micro-batches in one global batch: one per rank of the job per accumulation step.
int64_t MicroSteps(const v1::JobSpec& spec) {
  return int64_t{JobRanks(spec)} * std::max(1, spec.gradient_accumulation_steps());
}

// `spec` with `dimension` set to `value`.
v1::JobSpec WithValue(v1::JobSpec spec, FitDimension dimension, int64_t value) {
  if (dimension == FitDimension::kBlockSize) {
    if (spec.model().has_llama()) {
      spec.mutable_model()->mutable_llama()->set_block_size(value);
    } else {
      spec.mutable_model()->mutable_gpt()->set_block_size(value);
    }
  } else {
    spec.set_global_batch_size(value * MicroSteps(spec));
  }
  return spec;
}

// The fit at `value`, or the reason it cannot be laid out.
absl::StatusOr<Fit> FitAt(const v1::JobSpec& spec, FitDimension dimension, int64_t value) {
  Fit fit{value, WithValue(spec, dimension, value), {}};
  ASSIGN_OR_RETURN(fit.estimate, EstimateRankMemory(fit.spec));
  return fit;
}

}  // namespace

absl::StatusOr<Fit> LargestFitting(const v1::JobSpec& spec, FitDimension dimension,
                                   int64_t budget_bytes, int64_t max_value) {
  if (dimension == FitDimension::kBlockSize && !IsTransformer(spec.model())) {
    return absl::InvalidArgumentError(
        "the context (model.gpt.block_size, model.llama.block_size) is a transformer's; this is "
        "an MLP");
  }
  if (max_value < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the largest value to try must be positive, got ", max_value));
  }
  // A Llama's context is bounded by the positions it is made for.
  if (dimension == FitDimension::kBlockSize && spec.model().has_llama()) {
    max_value =
        std::min(max_value, WithLlamaDefaults(spec.model().llama()).max_position_embeddings());
  }
  // Keep every probe, and a micro-batch's global_batch_size, within int64.
  max_value = std::min(max_value, std::numeric_limits<int64_t>::max() - 1);
  if (dimension == FitDimension::kMicroBatch) {
    max_value = std::min(max_value, std::numeric_limits<int64_t>::max() / MicroSteps(spec));
  }
  ASSIGN_OR_RETURN(Fit best, FitAt(spec, dimension, 1));
  if (best.estimate.total() > budget_bytes) {
    return absl::OutOfRangeError(absl::StrCat(
        dimension == FitDimension::kBlockSize ? "a context of one token" : "a micro-batch of one",
        " does not fit ", FormatBytes(budget_bytes), ": one rank needs ",
        best.estimate.ToString()));
  }
  // `best` fits; `above` is the smallest value known not to, or max_value + 1. Double
  // until a value does not fit, then halve the gap.
  int64_t above = max_value + 1;
  while (above - best.value > 1) {
    const int64_t probe = above <= max_value           ? best.value + (above - best.value) / 2
                          : best.value > max_value / 2 ? max_value
                                                       : 2 * best.value;
    ASSIGN_OR_RETURN(Fit fit, FitAt(spec, dimension, probe));
    if (fit.estimate.total() <= budget_bytes) {
      best = std::move(fit);
    } else {
      above = probe;
    }
  }
  return best;
}

absl::StatusOr<int64_t> ParseByteSize(absl::string_view text) {
  static const std::vector<std::pair<const char*, double>> kUnits = {{"kib", 1024.0},
                                                                     {"mib", 1024.0 * 1024},
                                                                     {"gib", 1024.0 * 1024 * 1024},
                                                                     {"tib", 1099511627776.0},
                                                                     {"ki", 1024.0},
                                                                     {"mi", 1024.0 * 1024},
                                                                     {"gi", 1024.0 * 1024 * 1024},
                                                                     {"ti", 1099511627776.0},
                                                                     {"kb", 1e3},
                                                                     {"mb", 1e6},
                                                                     {"gb", 1e9},
                                                                     {"tb", 1e12},
                                                                     {"k", 1e3},
                                                                     {"m", 1e6},
                                                                     {"g", 1e9},
                                                                     {"t", 1e12},
                                                                     {"b", 1.0}};
  const std::string lowered = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  absl::string_view number = lowered;
  double scale = 1;
  for (const auto& [unit, factor] : kUnits) {
    if (absl::ConsumeSuffix(&number, unit)) {
      scale = factor;
      break;
    }
  }
  double value = 0;
  const auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a size: ", why));
  };
  if (!absl::SimpleAtod(absl::StripAsciiWhitespace(number), &value) || !std::isfinite(value)) {
    return invalid("expected a number and a unit such as 80GiB, 512Mi or 1.5TB");
  }
  // Whole bytes; a product within rounding of a whole number is that number ("4.1GB" is
  // 4100000000, though 4.1 * 1e9 is a hair below it in binary).
  const double product = value * scale, nearest = std::round(product);
  const double bytes =
      std::abs(product - nearest) <= 1e-9 * product ? nearest : std::floor(product);
  if (bytes < 1) return invalid("must be at least one byte");
  if (bytes >= 9.2e18) return invalid("too large");
  return static_cast<int64_t>(bytes);
}

}  // namespace shardwise
