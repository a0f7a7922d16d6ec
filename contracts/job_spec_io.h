#ifndef SHARDWISE_CONTRACTS_JOB_SPEC_IO_H_
#define SHARDWISE_CONTRACTS_JOB_SPEC_IO_H_

#include <string>

#include "absl/status/statusor.h"
#include "proto/job_spec.pb.h"

namespace shardwise {

// Parses a job spec written as YAML or JSON (JSON is YAML). The schema is protobuf's JSON
// mapping of v1::JobSpec: field names in snake_case or lowerCamelCase, enums by name.
// Unknown fields and malformed values are INVALID_ARGUMENT naming them.
absl::StatusOr<v1::JobSpec> ParseJobSpec(const std::string& text);

// Reads and parses a file; NOT_FOUND if it cannot be read.
absl::StatusOr<v1::JobSpec> ReadJobSpecFile(const std::string& path);

// The spec as indented JSON with snake_case names (for `describe` and logs).
std::string JobSpecToJson(const v1::JobSpec& spec);

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_JOB_SPEC_IO_H_
