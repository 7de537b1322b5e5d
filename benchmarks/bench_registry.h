// Subcommands of ucclzip-bench register themselves here, so that adding a benchmark never
// touches the others.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ucclzip::bench {

using SubcommandMain = std::function<int(const std::vector<std::string>& args)>;

struct Subcommand {
  std::string summary;           // one line, for `ucclzip-bench --help`
  std::vector<std::string> flags;  // the flags it reads, for `ucclzip-bench <subcommand> --help`
  SubcommandMain main;
};

inline std::map<std::string, Subcommand>& Subcommands() {
  static std::map<std::string, Subcommand> registry;
  return registry;
}

struct RegisterSubcommand {
  RegisterSubcommand(const std::string& name, const std::string& summary, std::vector<std::string> flags,
                     SubcommandMain main) {
    Subcommands()[name] = Subcommand{summary, std::move(flags), std::move(main)};
  }
};

}  // namespace ucclzip::bench
