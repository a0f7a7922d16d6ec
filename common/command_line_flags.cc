#include "common/command_line_flags.h"

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace shardwise {
namespace {

// The flag `name` stands for, and whether it is a bool's --noNAME form; null if none.
absl::CommandLineFlag* FindFlag(absl::string_view name, bool* negated) {
  *negated = false;
  if (absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name)) return flag;
  if (!absl::StartsWith(name, "no")) return nullptr;
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name.substr(2));
  if (flag == nullptr || !flag->IsOfType<bool>()) return nullptr;
  *negated = true;
  return flag;
}

// absl's flags that ask for usage: the program answers them itself (AsksForHelp).
bool IsHelpFlag(absl::string_view name) {
  static constexpr absl::string_view kNames[] = {"help",        "helpfull", "helpshort",
                                                 "helppackage", "helpon",   "helpmatch"};
  return absl::c_linear_search(kNames, name);
}

// absl's other flags outside the registry: those that bring flags from elsewhere, or
// excuse unknown ones, would bring them past the checks here, which only a line's own
// arguments pass.
bool IsRefusedAbslFlag(absl::string_view name) {
  static constexpr absl::string_view kNames[] = {"flagfile", "fromenv", "tryfromenv",
                                                 "undefok",  "version", "only_check_args"};
  return absl::c_linear_search(kNames, name);
}

// A flag as absl reads one argument: -name or --name, with =value or without (the value
// is then the next argument, unless the flag is a bool). nullopt for a positional one.
struct FlagArgument {
  std::string name;
  std::optional<std::string> value;
};
std::optional<FlagArgument> ReadFlagArgument(absl::string_view arg) {
  if (arg.size() < 2 || arg[0] != '-') return std::nullopt;
  arg.remove_prefix(arg[1] == '-' ? 2 : 1);
  const size_t equals = arg.find('=');
  FlagArgument flag{std::string(arg.substr(0, equals)), std::nullopt};
  if (equals != absl::string_view::npos) flag.value = std::string(arg.substr(equals + 1));
  return flag;
}

}  // namespace

absl::Status CheckCommandLineFlags(const std::vector<std::string>& args,
                                   std::vector<std::string>* given) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") break;  // what follows is positional
    std::optional<FlagArgument> read = ReadFlagArgument(args[i]);
    if (!read.has_value()) continue;
    const std::string& name = read->name;
    std::optional<std::string>& value = read->value;
    if (IsHelpFlag(name)) continue;
    if (IsRefusedAbslFlag(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": not taken here; give each flag on the command line itself"));
    }
    bool negated = false;
    absl::CommandLineFlag* flag = FindFlag(name, &negated);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": no such flag (--help lists them)"));
    }
    if (negated && value.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
    }
    if (!value.has_value() && flag->IsOfType<bool>()) value = negated ? "false" : "true";
    if (!value.has_value()) {
      if (i + 1 == args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
      value = args[++i];
    }
    std::string error;
    if (!flag->ParseFrom(*value, &error)) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", error));
    }
    if (given != nullptr) given->emplace_back(flag->Name());
  }
  return absl::OkStatus();
}

bool AsksForHelp(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg == "--") return false;
    const std::optional<FlagArgument> read = ReadFlagArgument(arg);
    if (read.has_value() && IsHelpFlag(read->name)) return true;
  }
  return false;
}

std::string DescribeFlags(absl::string_view defined_in) {
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (absl::EndsWith(flag->Filename(), defined_in)) flags.push_back(flag);
  }
  absl::c_sort(flags, [](const absl::CommandLineFlag* a, const absl::CommandLineFlag* b) {
    return a->Name() < b->Name();
  });
  std::string text;
  for (const absl::CommandLineFlag* flag : flags) {
    const std::string default_value = flag->DefaultValue();
    absl::StrAppend(&text, "  --", flag->Name(),
                    default_value.empty() ? "" : absl::StrCat(" (default ", default_value, ")"),
                    "\n      ", flag->Help(), "\n");
  }
  return text;
}

std::optional<int> AnswerHelpOrFlagMistake(absl::string_view program, absl::string_view usage,
                                           absl::string_view flags_file,
                                           const std::vector<std::string>& args,
                                           std::vector<std::string>* given) {
  if (AsksForHelp(args)) {
    std::printf("%s\nEvery flag:\n%s", std::string(usage).c_str(),
                DescribeFlags(flags_file).c_str());
    return 0;
  }
  if (const absl::Status flags = CheckCommandLineFlags(args, given); !flags.ok()) {
    std::fprintf(stderr, "%s: %s\n\n%s", std::string(program).c_str(),
                 std::string(flags.message()).c_str(), std::string(usage).c_str());
    return 2;
  }
  return std::nullopt;
}

std::optional<size_t> FirstPositional(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") return i + 1 < args.size() ? std::optional<size_t>(i + 1) : std::nullopt;
    const std::optional<FlagArgument> read = ReadFlagArgument(args[i]);
    if (!read.has_value()) return i;
    if (read->value.has_value()) continue;
    bool negated = false;
    const absl::CommandLineFlag* flag = FindFlag(read->name, &negated);
    if (flag != nullptr && !negated && !flag->IsOfType<bool>()) ++i;  // its value
  }
  return std::nullopt;
}

absl::Status CheckFlagsTaken(const std::string& command, const std::vector<std::string>& given,
                             const std::vector<std::string>& taken,
                             const std::vector<std::string>& everywhere) {
  for (const std::string& name : given) {
    if (absl::c_linear_search(taken, name) || absl::c_linear_search(everywhere, name)) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "--", name, ": `shardwise ", command, "` does not take it",
        taken.empty() ? std::string(" (it takes none of its own)")
                      : absl::StrCat(" (it takes --", absl::StrJoin(taken, ", --"), ")")));
  }
  return absl::OkStatus();
}

absl::Status CheckFlagAtLeast(absl::string_view name, int64_t value, int64_t minimum) {
  if (value >= minimum) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", name, " must be >= ", minimum, ", got ", value));
}

}  // namespace shardwise
