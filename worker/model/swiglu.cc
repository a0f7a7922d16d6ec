#include "worker/model/swiglu.h"

namespace shardwise::model {

Buffer SwiGlu::Forward(const StageContext& context, const float* x, Saved* saved) const {
  const int64_t rows = context.batch->rows;
  saved->gate = gate_.Forward(context, x, rows);
  saved->up = up_.Forward(context, x, rows);
  const size_t n = saved->gate.numel();
  saved->act = context.Activations(n);
  context.device->ActivationForward(v1::SILU, saved->gate.data(), n, saved->act.data());
  context.Round(saved->act);
  saved->hidden = context.Activations(n);
  context.device->MultiplyElementwise(saved->act.data(), saved->up.data(), n, saved->hidden.data());
  context.Round(saved->hidden);
  return down_.Forward(context, saved->hidden.data(), rows);
}

Buffer SwiGlu::Backward(const StageContext& context, const float* x, Saved* saved,
                        const float* dy) const {
  const int64_t rows = context.batch->rows;
  Buffer dhidden = down_.Backward(context, saved->hidden.data(), dy, rows, true);
  saved->hidden.Reset();
  const size_t n = dhidden.numel();
  // d up = dhidden * act; d act = dhidden * up, in dhidden's place, then through SiLU.
  Buffer dup = context.Activations(n);
  context.device->MultiplyElementwise(dhidden.data(), saved->act.data(), n, dup.data());
  context.Round(dup);
  saved->act.Reset();
  context.device->MultiplyElementwise(dhidden.data(), saved->up.data(), n, dhidden.data());
  context.Round(dhidden);
  saved->up.Reset();
  context.device->ActivationBackward(v1::SILU, saved->gate.data(), dhidden.data(), n,
                                     dhidden.data());
  context.Round(dhidden);
  saved->gate.Reset();
  Buffer dx = gate_.Backward(context, x, dhidden.data(), rows, true);
  dhidden.Reset();
  Buffer part = up_.Backward(context, x, dup.data(), rows, true);
  context.AddRounded(dx, part);
  return dx;
}

}  // namespace shardwise::model
