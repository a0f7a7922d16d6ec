#ifndef SHARDWISE_COMMON_COMMAND_LINE_FLAGS_H_
#define SHARDWISE_COMMON_COMMAND_LINE_FLAGS_H_

// The command line's flags checked before absl::ParseCommandLine reads them: that one
// exits 1 on a flag it does not know or a value it cannot parse, the code `shardwise
// watch` gives a job that ended other than SUCCEEDED. Checked here first, a mistyped
// flag is a usage error (exit 2) that names it, and no script reads it as a failed job.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace shardwise {

// OK when every flag in `args` (argv without the program's name; flags as absl reads
// them: -name or --name, =value or the next argument, --noname for a bool, nothing
// after "--") names a defined flag and carries a value it takes; INVALID_ARGUMENT naming
// the first that does not. Sets the flags it checks, as parsing them would. absl's usage
// flags (--help, --helpfull, ...) pass (AsksForHelp finds them); its flags that bring
// flags from elsewhere or excuse unknown ones (--flagfile, --fromenv, --undefok, ...)
// and --version are refused: what they bring would go unchecked.
// `given` (may be null) gets the name of each flag checked, as defined (--o is "o").
absl::Status CheckCommandLineFlags(const std::vector<std::string>& args,
                                   std::vector<std::string>* given = nullptr);

// Whether `args` (as CheckCommandLineFlags takes them) ask for usage: --help or another
// of absl's usage flags before any "--".
bool AsksForHelp(const std::vector<std::string>& args);

// Each flag defined in a file whose name ends with `defined_in`, by name: `  --NAME
// (default D)` and its help on the next line. absl's own --help lists only the flags of
// a file named after the program.
std::string DescribeFlags(absl::string_view defined_in);

// What a program answers to its command line before absl::ParseCommandLine reads it
// (`args`: argv without the program's name): with --help, `usage` and every flag of
// `flags_file` (DescribeFlags) on stdout, 0; with a flag mistake (CheckCommandLineFlags),
// "`program`: the mistake" and `usage` on stderr, 2; nullopt when it may go on, with
// `given` (may be null) as CheckCommandLineFlags leaves it.
std::optional<int> AnswerHelpOrFlagMistake(absl::string_view program, absl::string_view usage,
                                           absl::string_view flags_file,
                                           const std::vector<std::string>& args,
                                           std::vector<std::string>* given = nullptr);

// The index in `args` (as CheckCommandLineFlags takes them) of the first positional
// argument, read as absl reads the line: a flag's value given after it (`--name value`,
// a flag not a bool's) is the flag's, and everything after "--" is positional. nullopt
// when there is none.
std::optional<size_t> FirstPositional(const std::vector<std::string>& args);

// OK when each flag of `given` is among `taken` (a command's own) or `everywhere` (the
// connection's); else INVALID_ARGUMENT naming the first that is not and `command`: a flag
// a command ignores must not look as if it applied (`get workers --submitter=P` listed
// every worker).
absl::Status CheckFlagsTaken(const std::string& command, const std::vector<std::string>& given,
                             const std::vector<std::string>& taken,
                             const std::vector<std::string>& everywhere);

// OK when `value`, a number flag's, is at least `minimum`; else INVALID_ARGUMENT
// "--NAME must be >= MINIMUM, got VALUE" (`name` without its dashes). A daemon checks its
// counts, bounds and periods so: raised in silence, a 0 would serve otherwise than asked.
absl::Status CheckFlagAtLeast(absl::string_view name, int64_t value, int64_t minimum);

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_COMMAND_LINE_FLAGS_H_
