#include "bench_help.h"

#include <string>
#include <string_view>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "bench_registry.h"

namespace ucclzip::bench {
namespace {

bool IsHelpFlag(std::string_view arg) {
  return arg == "--help" || arg == "-help" || arg == "-h" || arg == "--helpshort" || arg == "-helpshort";
}

// One flag: "  --name=default" (single letters as "-b"), then its help indented below.
bool PrintFlag(const std::string& name) {
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  if (flag == nullptr) {
    std::fprintf(stderr, "ucclzip-bench: the subcommand lists a flag --%s that is not defined\n", name.c_str());
    return false;
  }
  const std::string dashes = name.size() == 1 ? "-" : "--";
  const std::string fallback = flag->DefaultValue();
  std::printf("  %s%s%s\n      %s\n", dashes.c_str(), name.c_str(), fallback.empty() ? "" : ("=" + fallback).c_str(),
              flag->Help().c_str());
  return true;
}

int PrintSubcommandHelp(const std::string& name, const Subcommand& subcommand) {
  std::printf("usage: ucclzip-bench %s [--flags]\n%s\n\nflags:\n", name.c_str(), subcommand.summary.c_str());
  for (const std::string& flag : subcommand.flags) {
    if (!PrintFlag(flag)) return 1;
  }
  return 0;
}

}  // namespace

void PrintSubcommands(std::FILE* out) {
  std::fprintf(out, "usage: ucclzip-bench <subcommand> [--flags]   (ucclzip-bench <subcommand> --help: its flags)\n\n"
                    "subcommands:\n");
  for (const auto& [name, subcommand] : Subcommands()) {
    std::fprintf(out, "  %-14s %s\n", name.c_str(), subcommand.summary.c_str());
  }
}

std::optional<int> HandleHelp(int argc, char** argv) {
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  const bool help_word = !args.empty() && args[0] == "help";
  bool asked = args.empty() || help_word;
  std::optional<std::string> subcommand;
  for (size_t i = help_word ? 1 : 0; i < args.size(); ++i) {
    if (IsHelpFlag(args[i])) asked = true;
    if (!subcommand && !args[i].starts_with("-")) subcommand = std::string(args[i]);
  }
  if (!asked) return std::nullopt;
  if (!subcommand) {
    PrintSubcommands(stdout);
    return 0;
  }
  auto found = Subcommands().find(*subcommand);
  if (found == Subcommands().end()) {
    std::fprintf(stderr, "ucclzip-bench: unknown subcommand '%s'\n", subcommand->c_str());
    PrintSubcommands(stderr);
    return 2;
  }
  return PrintSubcommandHelp(found->first, found->second);
}

}  // namespace ucclzip::bench
