// ucclzip-bench <subcommand> [--flags]: dispatches to the registered benchmarks.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "bench_cli.h"
#include "bench_help.h"
#include "bench_registry.h"

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "ucclzip-bench <subcommand> [--flags]; --help lists the subcommands, <subcommand> --help its flags");
  if (std::optional<int> exit_code = ucclzip::bench::HandleHelp(argc, argv)) return *exit_code;
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  auto& subcommands = ucclzip::bench::Subcommands();
  auto found = positional.size() < 2 ? subcommands.end() : subcommands.find(positional[1]);
  if (found == subcommands.end()) {
    if (positional.size() >= 2) std::fprintf(stderr, "ucclzip-bench: unknown subcommand '%s'\n", positional[1]);
    ucclzip::bench::PrintSubcommands(stderr);
    return 2;
  }
  std::vector<std::string> known;
  for (const auto& [name, subcommand] : subcommands) known.insert(known.end(), subcommand.flags.begin(), subcommand.flags.end());
  if (absl::Status given = ucclzip::bench::CheckGivenFlags(found->first, found->second.flags, known,
                                                                            std::vector<std::string>(argv + 1, argv + argc)); !given.ok()) {
    std::fprintf(stderr, "ucclzip-bench: %s\n", std::string(given.message()).c_str());
    return 2;
  }
  return found->second.main(std::vector<std::string>(positional.begin() + 2, positional.end()));
}
