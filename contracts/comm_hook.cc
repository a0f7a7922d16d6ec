#include "contracts/comm_hook.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/printable_text.h"

namespace shardwise {

std::string CommHookName(const v1::CommHook& hook) {
  std::string name = v1::CommHook::Hook_Name(hook.hook());
  if (name.empty()) name = absl::StrCat("hook ", static_cast<int>(hook.hook()));
  if (hook.wrapper() != v1::CommHook::NO_WRAPPER) {
    absl::StrAppend(&name, " in ", v1::CommHook::Wrapper_Name(hook.wrapper()));
  }
  return name;
}

absl::StatusOr<v1::CommHook> ParseCommHook(const std::string& hook, const std::string& wrapper,
                                           const std::string& hook_source,
                                           const std::string& wrapper_source) {
  v1::CommHook parsed;
  std::string upper = absl::AsciiStrToUpper(hook);
  if (upper == "NONE") upper = "NO_HOOK";
  v1::CommHook::Hook hook_value;
  if (!v1::CommHook::Hook_Parse(upper, &hook_value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        hook_source, ": unknown hook '", ShownValue(hook),
        "' (expected none, allreduce, fp16_compress, bf16_compress or mixed_precision)"));
  }
  parsed.set_hook(hook_value);
  if (!wrapper.empty()) {
    v1::CommHook::Wrapper wrapper_value;
    if (!v1::CommHook::Wrapper_Parse(absl::AsciiStrToUpper(wrapper), &wrapper_value)) {
      return absl::InvalidArgumentError(absl::StrCat(wrapper_source, ": unknown wrapper '",
                                                     ShownValue(wrapper),
                                                     "' (expected fp16_wrapper or bf16_wrapper)"));
    }
    parsed.set_wrapper(wrapper_value);
  }
  return parsed;
}

v1::CommHook HookInEffect(const v1::Job& job) {
  v1::CommHook hook = job.spec().comm_hook();
  for (const v1::HookSwitch& done : job.hook_switches()) {
    if (done.state() == v1::HookSwitch::APPLIED) hook = done.new_hook();
  }
  return hook;
}

bool SameHook(const v1::CommHook& a, const v1::CommHook& b) {
  return a.hook() == b.hook() && a.wrapper() == b.wrapper();
}

}  // namespace shardwise
