#ifndef SHARDWISE_TOKENIZER_SENTENCEPIECE_MODEL_CHECK_H_
#define SHARDWISE_TOKENIZER_SENTENCEPIECE_MODEL_CHECK_H_

// What libsentencepiece trusts in a model file and must not: its normalizer's
// precompiled_charsmap. That blob is a darts-clone double-array trie followed by the
// normalised strings, and the library walks the trie with every byte of the text it
// normalises, reading the array at whatever index a unit's offset gives and the strings
// at whatever offset a leaf's value gives, with no bound checked: a corrupt trie kills the
// program (SIGSEGV) in the middle of encoding. This check walks every path the library can
// take, over all 256 byte values at every node, and refuses a model where one leaves the
// array or lands outside the strings (or in a string with no end).
//
// It reads the model's protobuf wire format itself: the programs that load SentencePiece
// cannot link protobuf (libsentencepiece carries its own copy), and the coordinator, which
// checks a job's tokenizer at submission, cannot link SentencePiece.

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace shardwise {
namespace tokenizer {

// OK when `model` (a serialised ModelProto) is well-formed protobuf and the charsmaps of
// its normalizer_spec and denormalizer_spec, where present, are safe to walk as above;
// INVALID_ARGUMENT "NAME: ..." saying which part is not.
absl::Status CheckSentencePieceModel(absl::string_view model, const std::string& name);

// The check of one precompiled_charsmap blob (exposed for tests).
absl::Status CheckPrecompiledCharsmap(absl::string_view blob);

// Where the normalizer_spec's precompiled_charsmap lies inside `model` (a view into it);
// empty where it has none or its encoding is broken. For tests that corrupt one.
absl::string_view FindNormalizerCharsmap(absl::string_view model);

}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_SENTENCEPIECE_MODEL_CHECK_H_
