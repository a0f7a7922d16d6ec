#ifndef SHARDWISE_CONTRACTS_TOKEN_FILES_H_
#define SHARDWISE_CONTRACTS_TOKEN_FILES_H_

// Where the ids of a token file lie (data.tokens): raw little-endian uint16 (nanoGPT's
// train.bin), or the 1-D tensor "tokens" (U16, I32 or I64) of a safetensors file. The
// coordinator inspects a file at submission (its size and header, never its ids); the
// workers read it a sequence at a time and check every id (worker/data/tokens.h).

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/untrusted_file.h"
#include "proto/job_spec.pb.h"

namespace shardwise {

struct TokenFileLayout {
  uint64_t offset = 0;  // of the first id, in bytes
  int element = 2;      // bytes per id: 2, 4 or 8
  int64_t count = 0;
};

// A token file of job.`field` at `path` that does not fit: INVALID_ARGUMENT naming both.
absl::Status TokenFileInvalid(const std::string& field, const std::string& path,
                              const std::string& what);

// `read`, an error opening or reading that file, naming both: what this host could not
// read now (UNAVAILABLE: an I/O error, no descriptor left) stays what it is (another
// attempt, elsewhere, may read the file; a client retries), the rest is INVALID_ARGUMENT.
absl::Status TokenFileReadFailure(const std::string& field, const std::string& path,
                                  const absl::Status& read);

// The format a path is read in: `format`, or by its extension when unspecified.
v1::TokenData::Format ResolveTokenFormat(const std::string& path, v1::TokenData::Format format);

// Opens the token file of job.`field` at `path` as `links` says (common/untrusted_file.h):
// INVALID_ARGUMENT naming both when it is missing, not a regular file or a link where
// `links` refuses one; UNAVAILABLE, naming them too, when this host could not open it now.
absl::StatusOr<UntrustedFile> OpenTokenFile(const std::string& field, const std::string& path,
                                            Links links);

// Where the ids of `file` (opened from `path`) lie, from its size and header only:
// INVALID_ARGUMENT naming job.`field` and the path when it is not a token file of that
// format, UNAVAILABLE when this host could not read its header now. A reader that goes on
// to read the ids reads them through the same `file`: the layout is that file's, not one
// found at the path later.
absl::StatusOr<TokenFileLayout> TokenFileLayoutOf(const std::string& field, const std::string& path,
                                                  v1::TokenData::Format format,
                                                  const UntrustedFile& file);

// OpenTokenFile, then TokenFileLayoutOf: the coordinator's inspection at submission.
absl::StatusOr<TokenFileLayout> InspectTokenFile(const std::string& field, const std::string& path,
                                                 v1::TokenData::Format format, Links links);

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_TOKEN_FILES_H_
