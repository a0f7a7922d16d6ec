#include "worker/model/swiglu.h"

namespace shardwise::model {

Buffer SwiGlu::Forward(const StageContext& context, ConstTensorRef x, Saved* saved) const {
  const int64_t rows = context.batch->rows;
  saved->gate = gate_.Forward(context, x, rows);
  saved->up = up_.Forward(context, x, rows);
  const size_t n = saved->gate.numel();
  saved->act = context.Activations(n);
  context.device->ActivationForward(v1::SILU, saved->gate.ref(), n, saved->act.ref());
  context.Round(saved->act);
  saved->hidden = context.Activations(n);
  context.device->MultiplyElementwise(saved->act.ref(), saved->up.ref(), n, saved->hidden.ref());
  context.Round(saved->hidden);
  return down_.Forward(context, saved->hidden.ref(), rows);
}

Buffer SwiGlu::Backward(const StageContext& context, ConstTensorRef x, Saved* saved,
                        ConstTensorRef dy) const {
  const int64_t rows = context.batch->rows;
  Buffer dhidden = down_.Backward(context, saved->hidden.ref(), dy, rows, true);
  saved->hidden.Reset();
  const size_t n = dhidden.numel();
  // d up = dhidden * act; d act = dhidden * up, in dhidden's place, then through SiLU.
  Buffer dup = context.Activations(n);
  context.device->MultiplyElementwise(dhidden.ref(), saved->act.ref(), n, dup.ref());
  context.Round(dup);
  saved->act.Reset();
  context.device->MultiplyElementwise(dhidden.ref(), saved->up.ref(), n, dhidden.ref());
  context.Round(dhidden);
  saved->up.Reset();
  context.device->ActivationBackward(v1::SILU, saved->gate.ref(), dhidden.ref(), n, dhidden.ref());
  context.Round(dhidden);
  saved->gate.Reset();
  Buffer dx = gate_.Backward(context, x, dhidden.ref(), rows, true);
  dhidden.Reset();
  Buffer part = up_.Backward(context, x, dup.ref(), rows, true);
  context.AddRounded(dx, part);
  return dx;
}

}  // namespace shardwise::model
