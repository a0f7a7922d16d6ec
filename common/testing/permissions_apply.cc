#include "common/testing/permissions_apply.h"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace shardwise {
namespace testing {

bool DropPermissionOverride() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  for (const int cap : {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH}) {
    // From the permitted set too: access(2) as root takes its effective set from it.
    data[cap / 32].effective &= ~(1u << (cap % 32));
    data[cap / 32].permitted &= ~(1u << (cap % 32));
  }
  return syscall(SYS_capset, &header, data) == 0;
}

}  // namespace testing
}  // namespace shardwise
