#ifndef SHARDWISE_TOKENIZER_HUGGINGFACE_CUT_SAFETY_H_
#define SHARDWISE_TOKENIZER_HUGGINGFACE_CUT_SAFETY_H_

// Whether a tokenizer.json keeps Tokenizer::KeepsIdsAtCuts's promise: a document cut after
// a newline, before an ASCII letter, encodes piece by piece to the ids of the whole. The
// other kinds keep it by construction; a tokenizer.json's components may not:
//   - a normalizer acting on a text's ends (Prepend, Strip) would act again at the cut:
//     Mistral's and Llama 2's files prepend "▁" to each stretch;
//   - a pre-tokenizer acting on its start (Metaspace with prepend_scheme "always",
//     ByteLevel with add_prefix_space) would too;
//   - where the pre-tokenizer leaves the newline and the letter in one piece (Gemma 3's
//     splits at spaces only), the model could join them into one token (a token holding a
//     newline and then a letter), mark the letter as a word's continuation
//     (continuing_subword_prefix, end_of_word_suffix), fuse unknown characters on both
//     sides into one (fuse_unk, unless byte_fallback leaves no character unknown), or
//     take one side whole as a token where the piece merges otherwise (ignore_merges).
//   - an added token could be matched otherwise: one holding a newline then a letter, an
//     lstrip one starting with a letter (it takes the newline before it), a single_word
//     one ending in a newline (refused where a letter follows it).
// The normalizer and the pre-tokenizer are checked by running them on probe texts whole
// and cut, the model by its vocabulary and settings. A tokenizer that fails is not cut
// inside a document (the corpus still encodes documents side by side).

#include "tokenizer/huggingface/added_tokens.h"
#include "tokenizer/huggingface/bpe_model.h"
#include "tokenizer/huggingface/normalizers.h"
#include "tokenizer/huggingface/pre_tokenizers.h"

namespace shardwise {
namespace tokenizer {
namespace hf {

// `normalizer` and `pre_tokenizer` may be null (none in the file).
bool CutsKeepIds(const Normalizer* normalizer, const PreTokenizer* pre_tokenizer,
                 const BpeModel& model, const AddedTokens& added);

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_HUGGINGFACE_CUT_SAFETY_H_
