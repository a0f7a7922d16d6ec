// shardwise-tokenize: text to token files with a tokenizer of the user's choice, and the
// encode/decode/prefix the sampler asks of a tokenizer folder. The CLI's `shardwise tokenize`
// runs this program in its place: it links libsentencepiece, whose bundled protobuf
// clashes with the one the CLI links (//tokenizer:tokenizer).
//
//   shardwise-tokenize TEXT... -o DIR [--tokenizer=bytes|sentencepiece|gpt2|tiktoken|huggingface]
//   shardwise-tokenize encode --tokenizer_dir=DIR --text=TEXT     ids, space-separated
//   shardwise-tokenize encode --tokenizer_dir=DIR --texts_json=F [--check_round_trip]
//                                             a line of ids per text (tests/tokenizers)
//   shardwise-tokenize decode --tokenizer_dir=DIR --ids=1,2,3     the text
//   shardwise-tokenize decode --tokenizer_dir=DIR --ids_file=F    the text of F's ids
//   shardwise-tokenize prefix --tokenizer_dir=DIR                 the ids before a document

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/bazel_run.h"
#include "common/command_line_flags.h"
#include "nlohmann/json.hpp"
#include "tokenizer/corpus.h"
#include "tokenizer/load.h"
#include "tokenizer/manifest.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/terminal_text.h"

ABSL_FLAG(std::string, o, "", "the folder for the token files and the tokenizer");
ABSL_FLAG(std::string, output, "", "the same as -o");
ABSL_FLAG(std::string, tokenizer, "bytes", "bytes, sentencepiece, gpt2, tiktoken or huggingface");
ABSL_FLAG(double, val_fraction, 0.1, "the share of the text that goes to the val file");
ABSL_FLAG(int32_t, threads, 2, "threads that encode");
ABSL_FLAG(std::string, sentencepiece_model, "",
          "sentencepiece: an existing tokenizer.model (Llama 2's) instead of training one");
ABSL_FLAG(std::string, preset, "small", "sentencepiece training: small or llama2");
ABSL_FLAG(int32_t, vocab_size, 0, "sentencepiece training: pieces (default: the preset's)");
ABSL_FLAG(std::string, model_type, "", "sentencepiece training: bpe or unigram");
ABSL_FLAG(double, character_coverage, 0, "sentencepiece training: default the preset's");
ABSL_FLAG(std::string, byte_fallback, "", "sentencepiece training: true or false");
ABSL_FLAG(std::string, encoder_json, "", "gpt2: GPT-2's encoder.json");
ABSL_FLAG(std::string, vocab_bpe, "", "gpt2: GPT-2's vocab.bpe");
ABSL_FLAG(std::string, tiktoken, "", "tiktoken: a .tiktoken rank file");
ABSL_FLAG(std::string, tokenizer_json, "", "huggingface: a Hugging Face tokenizer.json");
ABSL_FLAG(std::string, tokenizer_config, "",
          "huggingface: its tokenizer_config.json (default: the one beside --tokenizer_json, if "
          "there; none: no file)");
ABSL_FLAG(std::string, encoding, "",
          "tiktoken: the file's encoding (gpt2, r50k_base, p50k_base, cl100k_base, o200k_base, "
          "llama3; default: from the file's name)");
ABSL_FLAG(std::string, tokenizer_dir, "", "encode/decode/prefix: a folder `tokenize` wrote");
ABSL_FLAG(std::string, text, "", "encode: the text");
ABSL_FLAG(std::string, texts_json, "",
          "encode: a file holding a JSON array of texts, each encoded on a line of its own");
ABSL_FLAG(bool, check_round_trip, false,
          "encode: fail unless each text's ids decode back to the text");
ABSL_FLAG(std::string, ids, "", "decode: the ids, comma-separated");
ABSL_FLAG(std::string, ids_file, "",
          "decode: a file holding the ids, comma- or space-separated (more than one command-line "
          "argument holds: 128 KiB)");

namespace shardwise {
namespace tokenizer {
namespace {

constexpr char kUsage[] = R"(shardwise tokenize: token files for data.tokens, with a tokenizer.

Usage:
  shardwise tokenize TEXT... -o DIR [--val_fraction=0.1] [--threads=2]
      --tokenizer=bytes                 each byte one id (vocabulary 256; the default)
      --tokenizer=sentencepiece         train a model on the text: [--preset=small|llama2]
                                        [--vocab_size=N] [--model_type=bpe|unigram]
                                        [--character_coverage=X] [--byte_fallback=true]
                                        or load one: --sentencepiece_model=tokenizer.model
      --tokenizer=gpt2                  --encoder_json=FILE --vocab_bpe=FILE
      --tokenizer=tiktoken              --tiktoken=FILE [--encoding=cl100k_base]
      --tokenizer=huggingface           --tokenizer_json=FILE (Hugging Face's tokenizer.json:
                                        Llama 3's, Qwen3's, Gemma 3's, ...)
                                        [--tokenizer_config=FILE|none] (default: the
                                        tokenizer_config.json beside it, if there)

Each TEXT file is a document. Writes DIR/train.bin and DIR/val.bin (uint16 ids), or
DIR/train.safetensors and DIR/val.safetensors (I32) for a vocabulary above 65,536, and
the tokenizer in DIR/tokenizer (name it in data.tokens.tokenizer). A flag of another
--tokenizer kind (or of training, with --sentencepiece_model) is refused, not ignored.
)";

// --tokenizer_config, else the tokenizer_config.json beside --tokenizer_json when there is
// one (a model's folder as the Hub has it); "" for none.
std::string ChosenTokenizerConfig() {
  std::string config = absl::GetFlag(FLAGS_tokenizer_config);
  if (config == "none") return "";
  if (!config.empty()) return config;
  const std::filesystem::path beside =
      std::filesystem::path(absl::GetFlag(FLAGS_tokenizer_json)).parent_path() /
      "tokenizer_config.json";
  std::error_code error;
  if (!std::filesystem::is_regular_file(beside, error)) return "";
  std::fprintf(stderr, "with %s (--tokenizer_config=none: without)\n", beside.string().c_str());
  return beside.string();
}

// The tokenizer the flags ask for, and its files; a SentencePiece model is trained first.
// A trained model is written straight into `tokenizer_dir`, where the folder keeps it.
absl::StatusOr<TokenizerFiles> ChosenFiles(const std::vector<std::string>& inputs,
                                           const std::string& tokenizer_dir) {
  TokenizerFiles files{absl::GetFlag(FLAGS_tokenizer), "", {}};
  if (files.kind == "gpt2") {
    files.paths = {{"encoder_json", absl::GetFlag(FLAGS_encoder_json)},
                   {"vocab_bpe", absl::GetFlag(FLAGS_vocab_bpe)}};
  } else if (files.kind == "tiktoken") {
    files.paths = {{"ranks", absl::GetFlag(FLAGS_tiktoken)}};
    files.encoding = absl::GetFlag(FLAGS_encoding);
    if (files.encoding.empty()) {
      files.encoding = std::filesystem::path(files.paths["ranks"]).stem().string();
    }
  } else if (files.kind == "huggingface") {
    files.paths = {{"tokenizer_json", absl::GetFlag(FLAGS_tokenizer_json)},
                   {"tokenizer_config_json", ChosenTokenizerConfig()}};
  } else if (files.kind == "sentencepiece") {
    std::string model = absl::GetFlag(FLAGS_sentencepiece_model);
    if (model.empty()) {
      SentencePieceTraining training;
      training.preset = absl::GetFlag(FLAGS_preset);
      training.vocab_size = absl::GetFlag(FLAGS_vocab_size);
      training.model_type = absl::GetFlag(FLAGS_model_type);
      training.character_coverage = absl::GetFlag(FLAGS_character_coverage);
      training.byte_fallback = absl::GetFlag(FLAGS_byte_fallback);
      training.threads = absl::GetFlag(FLAGS_threads);
      std::fprintf(stderr, "training a SentencePiece model (preset %s)\n", training.preset.c_str());
      auto trained = TrainSentencePiece(training, inputs);
      if (!trained.ok()) return trained.status();
      std::error_code error;
      std::filesystem::create_directories(tokenizer_dir, error);
      model = tokenizer_dir + "/tokenizer.model";
      std::ofstream out(model, std::ios::binary | std::ios::trunc);
      out << *trained;
      if (!out.good()) return absl::PermissionDeniedError(absl::StrCat("cannot write ", model));
    }
    files.paths = {{"model", model}};
  }
  return files;
}

void PrintProgress(const CorpusProgress& progress) {
  std::fprintf(stderr, "\rtokenized %.1f of %.1f MB (%.1f MB/s), %lld tokens",
               progress.bytes_done / 1e6, progress.bytes_total / 1e6,
               progress.bytes_done / 1e6 / std::max(progress.seconds, 1e-9),
               static_cast<long long>(progress.tokens));
}

// Puts the tokenizer folder written at `staged` in place as `tokenizer_dir`, replacing
// the one there (a run before's): only once the token files it describes are in place.
absl::Status PutTokenizerInPlace(const std::string& staged, const std::string& tokenizer_dir) {
  const std::string replaced = tokenizer_dir + ".replaced";
  std::error_code error;
  std::filesystem::remove_all(replaced, error);
  if (std::filesystem::exists(tokenizer_dir, error)) {
    std::filesystem::rename(tokenizer_dir, replaced, error);
  }
  if (!error) std::filesystem::rename(staged, tokenizer_dir, error);
  if (error) {
    return absl::PermissionDeniedError(absl::StrCat("cannot put the tokenizer written at '", staged,
                                                    "' in place as '", tokenizer_dir,
                                                    "': ", error.message()));
  }
  std::filesystem::remove_all(replaced, error);
  return absl::OkStatus();
}

// Tokenizes `inputs` into `dir`, the tokenizer written to `staged` and put in place as
// DIR/tokenizer once the token files are.
absl::Status TokenizeWithStagedTokenizer(const std::vector<std::string>& inputs,
                                         const std::string& dir, const std::string& staged,
                                         const CorpusOptions& options) {
  const std::string tokenizer_dir = dir + "/tokenizer";
  auto files = ChosenFiles(inputs, staged);
  if (!files.ok()) return files.status();
  auto tokenizer = LoadFromFiles(*files);
  if (!tokenizer.ok()) return tokenizer.status();
  auto manifest = SaveTokenizerFolder(staged, *files, **tokenizer);
  if (!manifest.ok()) return manifest.status();
  auto out = TokenizeCorpus(**tokenizer, inputs, dir, options);
  std::fprintf(stderr, "\n");
  if (!out.ok()) return out.status();
  if (absl::Status placed = PutTokenizerInPlace(staged, tokenizer_dir); !placed.ok()) return placed;
  std::printf(
      "%s: %lld tokens\n%s: %lld tokens\n%.1f MB in %.2f s (%.1f MB/s)\n"
      "tokenizer: %s (%s, vocabulary %lld): name it in data.tokens.tokenizer\n",
      out->train_path.c_str(), static_cast<long long>(out->train_tokens), out->val_path.c_str(),
      static_cast<long long>(out->val_tokens), out->bytes / 1e6, out->seconds,
      out->bytes / 1e6 / std::max(out->seconds, 1e-9), tokenizer_dir.c_str(),
      manifest->kind.c_str(), static_cast<long long>(manifest->vocab_size));
  return absl::OkStatus();
}

absl::Status TokenizeText(const std::vector<std::string>& inputs, const std::string& dir) {
  CorpusOptions options;
  options.val_fraction = absl::GetFlag(FLAGS_val_fraction);
  options.threads = absl::GetFlag(FLAGS_threads);
  options.on_progress = PrintProgress;
  // Before a model is trained or a file written: a refused run leaves DIR as it was.
  if (absl::Status checked = CheckCorpus(inputs, options); !checked.ok()) return checked;
  // The tokenizer is written beside its place and put there once the token files are: a
  // run that fails part way never leaves a tokenizer with another's token files.
  const std::string staged = dir + "/.tokenizer.staged";
  std::error_code error;
  std::filesystem::remove_all(staged, error);  // a run killed before
  absl::Status done = TokenizeWithStagedTokenizer(inputs, dir, staged, options);
  std::filesystem::remove_all(staged, error);  // moved into place, or what a failure left
  return done;
}

// The bytes of the file `flag` names (ReadFileBytes: a regular file, never a FIFO waited
// on, of bounded size); an error names the flag.
absl::StatusOr<std::string> FlaggedFile(const char* flag, const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFileBytes(path);
  if (bytes.ok()) return bytes;
  return absl::Status(bytes.status().code(), absl::StrCat(flag, ": ", bytes.status().message()));
}

// --text, or each text of --texts_json (how tests/tokenizers/check.sh compares encoders).
absl::StatusOr<std::vector<std::string>> TextsToEncode() {
  const std::string path = absl::GetFlag(FLAGS_texts_json);
  if (path.empty()) return std::vector<std::string>{absl::GetFlag(FLAGS_text)};
  if (!absl::GetFlag(FLAGS_text).empty()) {
    return absl::InvalidArgumentError("--text and --texts_json: give one of them, not both");
  }
  const absl::StatusOr<std::string> json = FlaggedFile("--texts_json", path);
  if (!json.ok()) return json.status();
  nlohmann::json texts = nlohmann::json::parse(*json, nullptr, /*allow_exceptions=*/false);
  if (!texts.is_array()) {
    return absl::InvalidArgumentError(absl::StrCat("--texts_json: ", path, " is not a JSON array"));
  }
  std::vector<std::string> out;
  for (const nlohmann::json& text : texts) {
    if (!text.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--texts_json: ", path, " holds a non-string"));
    }
    out.push_back(text.get<std::string>());
  }
  return out;
}

// DATA_LOSS when `decoded`, what text number `index`'s ids decode to, is not `text`,
// naming the first byte that differs.
absl::Status SameText(size_t index, const std::string& text, const std::string& decoded) {
  if (decoded == text) return absl::OkStatus();
  const size_t at = static_cast<size_t>(
      std::mismatch(text.begin(), text.end(), decoded.begin(), decoded.end()).first - text.begin());
  return absl::DataLossError(absl::StrCat("round trip: text ", index,
                                          " decodes to a different text from byte ", at, ": \"",
                                          ForTerminal(decoded.substr(at, 20)), "\" where it has \"",
                                          ForTerminal(text.substr(at, 20)), "\""));
}

// Prints each text's ids on a line of its own.
absl::Status EncodeTexts(const Tokenizer& tokenizer) {
  auto texts = TextsToEncode();
  if (!texts.ok()) return texts.status();
  for (size_t i = 0; i < texts->size(); ++i) {
    std::vector<int32_t> ids;
    tokenizer.Encode((*texts)[i], /*document_start=*/true, &ids);
    std::printf("%s\n", absl::StrJoin(ids, " ").c_str());
    if (absl::GetFlag(FLAGS_check_round_trip)) {
      absl::Status same = SameText(i, (*texts)[i], tokenizer.Decode(ids));
      if (!same.ok()) return same;
    }
  }
  return absl::OkStatus();
}

// Prints the text of --ids, or of --ids_file's ids.
absl::Status DecodeIds(const Tokenizer& tokenizer) {
  const std::string path = absl::GetFlag(FLAGS_ids_file);
  const std::string flag = path.empty() ? "--ids" : "--ids_file";
  std::string listed = absl::GetFlag(FLAGS_ids);
  if (!path.empty() && !listed.empty()) {
    return absl::InvalidArgumentError("--ids and --ids_file: give one of them, not both");
  }
  if (!path.empty()) {
    absl::StatusOr<std::string> bytes = FlaggedFile("--ids_file", path);
    if (!bytes.ok()) return bytes.status();
    listed = *std::move(bytes);
  }
  std::vector<int32_t> ids;
  for (absl::string_view field :
       absl::StrSplit(listed, absl::ByAnyChar(", \n"), absl::SkipEmpty())) {
    int32_t id = 0;
    if (!absl::SimpleAtoi(field, &id)) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, ": \"", ForTerminal(std::string(field.substr(0, 20))), "\" is not an id"));
    }
    ids.push_back(id);
  }
  if (ids.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": no ids given (a list like 464,3290 or 464 3290)"));
  }
  const std::string text = tokenizer.Decode(ids);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return absl::OkStatus();
}

// Prints the ids a corpus puts before each document's (its BOS, if any), on one line:
// what a model trained on the token files saw at a document's start, and a prompt should
// start with (as transformers' tokenizer(prompt) adds it).
absl::Status PrintDocumentPrefix(const Tokenizer& tokenizer) {
  std::printf("%s\n", absl::StrJoin(tokenizer.DocumentPrefix(), " ").c_str());
  return absl::OkStatus();
}

// The flags `verb` (encode, decode, prefix; "" for writing token files with the
// --tokenizer `kind`) takes, and the command they are named for: a flag of another verb
// or kind would pass unread (--vocab_size with --tokenizer=gpt2 trains nothing).
// nullopt for a kind this program does not know, which TokenizeText names.
std::optional<std::pair<std::string, std::vector<std::string>>> FlagsTaken(
    const std::string& verb, const std::string& kind) {
  if (verb == "encode") {
    return {{"tokenize encode", {"tokenizer_dir", "text", "texts_json", "check_round_trip"}}};
  }
  if (verb == "decode") return {{"tokenize decode", {"tokenizer_dir", "ids", "ids_file"}}};
  if (verb == "prefix") return {{"tokenize prefix", {"tokenizer_dir"}}};
  static const auto* const kOfKind = new std::map<std::string, std::vector<std::string>>{
      {"bytes", {}},
      {"sentencepiece", {"sentencepiece_model"}},
      {"gpt2", {"encoder_json", "vocab_bpe"}},
      {"tiktoken", {"tiktoken", "encoding"}},
      {"huggingface", {"tokenizer_json", "tokenizer_config"}},
  };
  const auto of_kind = kOfKind->find(kind);
  if (of_kind == kOfKind->end()) return std::nullopt;
  std::vector<std::string> taken = {"o", "output", "tokenizer", "val_fraction", "threads"};
  taken.insert(taken.end(), of_kind->second.begin(), of_kind->second.end());
  std::string command = absl::StrCat("tokenize --tokenizer=", kind);
  if (kind == "sentencepiece" && !absl::GetFlag(FLAGS_sentencepiece_model).empty()) {
    absl::StrAppend(&command, " --sentencepiece_model");  // a model given: none trained
  } else if (kind == "sentencepiece") {
    taken.insert(taken.end(),
                 {"preset", "vocab_size", "model_type", "character_coverage", "byte_fallback"});
  }
  return {{command, taken}};
}

// INVALID_ARGUMENT naming a flag of `given` that the command of `args` does not take.
absl::Status CheckFlagsApply(const std::vector<std::string>& args,
                             const std::vector<std::string>& given) {
  const bool verb =
      args.size() == 1 && (args[0] == "encode" || args[0] == "decode" || args[0] == "prefix");
  const auto taken = FlagsTaken(verb ? args[0] : "", absl::GetFlag(FLAGS_tokenizer));
  if (!taken.has_value()) return absl::OkStatus();
  return CheckFlagsTaken(taken->first, given, taken->second, {});
}

absl::Status EncodeOrDecode(const std::string& verb) {
  if (absl::GetFlag(FLAGS_tokenizer_dir).empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tokenizer_dir: ", verb, " needs the tokenizer folder to ", verb, " with"));
  }
  auto tokenizer = LoadTokenizer(absl::GetFlag(FLAGS_tokenizer_dir));
  if (!tokenizer.ok()) return tokenizer.status();
  if (verb == "prefix") return PrintDocumentPrefix(**tokenizer);
  return verb == "encode" ? EncodeTexts(**tokenizer) : DecodeIds(**tokenizer);
}

}  // namespace
}  // namespace tokenizer
}  // namespace shardwise

// Exit codes (as the CLI's usage states them): 0 done, 2 bad usage or an invalid argument,
// 1 any other failure. Offline, so never the CLI's 3 (an outcome unknown).
int main(int argc, char** argv) {
  // Paths the user typed are relative to where `bazel run` was typed, when it was.
  if (const absl::Status entered = shardwise::EnterBazelRunWorkingDirectory(); !entered.ok()) {
    std::fprintf(stderr, "%s: %s\n", "shardwise tokenize", std::string(entered.message()).c_str());
    return 1;
  }
  absl::SetProgramUsageMessage(shardwise::tokenizer::kUsage);
  std::vector<std::string> given;
  if (const std::optional<int> answered = shardwise::AnswerHelpOrFlagMistake(
          "shardwise tokenize", shardwise::tokenizer::kUsage, "tokenizer/tokenize_main.cc",
          std::vector<std::string>(argv + 1, argv + argc), &given)) {
    return *answered;
  }
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  std::vector<std::string> args(positional.begin() + 1, positional.end());
  if (const absl::Status applies = shardwise::tokenizer::CheckFlagsApply(args, given);
      !applies.ok()) {
    std::fprintf(stderr, "shardwise tokenize: %s\n\n%s", std::string(applies.message()).c_str(),
                 shardwise::tokenizer::kUsage);
    return 2;
  }
  std::string dir = absl::GetFlag(FLAGS_output);
  if (dir.empty()) dir = absl::GetFlag(FLAGS_o);
  absl::Status status;
  if (args.size() == 1 && (args[0] == "encode" || args[0] == "decode" || args[0] == "prefix")) {
    status = shardwise::tokenizer::EncodeOrDecode(args[0]);
  } else if (args.empty() || dir.empty()) {
    std::fprintf(stderr, "shardwise tokenize: takes text files and -o DIR\n\n%s",
                 shardwise::tokenizer::kUsage);
    return 2;
  } else {
    status = shardwise::tokenizer::TokenizeText(args, dir);
  }
  if (status.ok()) return 0;
  std::fprintf(stderr, "shardwise tokenize: %s\n", std::string(status.message()).c_str());
  return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}
