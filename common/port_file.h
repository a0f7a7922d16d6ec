#ifndef SHARDWISE_COMMON_PORT_FILE_H_
#define SHARDWISE_COMMON_PORT_FILE_H_

// The daemons' --port_file and --metrics_port_file: the port a server bound (with
// address :0) for scripts and tests to read.

#include <string>

namespace shardwise {

// Writes `port` to `path` under a temporary name first, then renames it, so a reader never
// sees half a number. Does nothing for an empty path.
void WritePortFile(const std::string& path, int port);

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_PORT_FILE_H_
