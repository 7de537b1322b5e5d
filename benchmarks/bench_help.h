// The help of ucclzip-bench: `ucclzip-bench`, `--help` or `help` list the subcommands with their
// one-line summaries; `<subcommand> --help` or `help <subcommand>` show the flags that
// subcommand reads, with their help and defaults. (--helpfull, Abseil's, lists every flag.)
#pragma once

#include <cstdio>
#include <optional>

namespace ucclzip::bench {

// When the command line asks for help: prints it and returns the exit code. Else nullopt.
std::optional<int> HandleHelp(int argc, char** argv);

// "usage: ..." and one line per subcommand.
void PrintSubcommands(std::FILE* out);

}  // namespace ucclzip::bench
