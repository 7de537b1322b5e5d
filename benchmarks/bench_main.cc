// ucclzip-bench <subcommand> [--flags]: dispatches to the registered benchmarks.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "bench_registry.h"

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("ucclzip-bench <subcommand> [--flags]; --helpfull lists every flag");
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  auto& subcommands = ucclzip::bench::Subcommands();
  if (positional.size() < 2 || subcommands.find(positional[1]) == subcommands.end()) {
    if (positional.size() >= 2) std::fprintf(stderr, "unknown subcommand '%s'\n", positional[1]);
    std::fprintf(stderr, "usage: %s <subcommand> [--flags]\n", argv[0]);
    for (const auto& [name, sub] : subcommands) std::fprintf(stderr, "  %-11s %s\n", name.c_str(), sub.summary.c_str());
    return 2;
  }
  std::vector<std::string> rest(positional.begin() + 2, positional.end());
  return subcommands[positional[1]].main(rest);
}
