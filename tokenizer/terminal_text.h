#ifndef SHARDWISE_TOKENIZER_TERMINAL_TEXT_H_
#define SHARDWISE_TOKENIZER_TERMINAL_TEXT_H_

// Decoded text made safe to print: a model's sample can hold any byte.

#include <string>

namespace shardwise {
namespace tokenizer {

// `text` with control characters other than newline and tab (C0, DEL, C1) and bytes that
// are not valid UTF-8 written as \xNN; everything else as it is.
std::string ForTerminal(const std::string& text);

}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_TERMINAL_TEXT_H_
