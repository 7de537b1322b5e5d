#!/usr/bin/env python3
"""Checks the benchmark scripts that run on the GPU machine (a ctest): each must parse (`bash -n`),
and every flag written out after a subcommand in benchmarks/gpu/*.sh, *.bash,
benchmarks/shaped-link and scripts/ must be one that subcommand's --help lists. The benchmark refuses a flag its subcommand does not
read, so a script that passes one fails every case it runs, and only on the GPU machine, after
its build: direct-blocks.sh passed `sendrecv -c 1` for four sessions (H100 run s29-5).
Flags held in variables cannot be read here; a flag written out can.
    check_script_flags.py path/to/ucclzip-bench FILE...
"""
import re
import subprocess
import sys

SUBCOMMANDS = ("sendrecv", "allreduce", "allgather", "reducescatter", "broadcast", "weightsync", "codec")
# The benchmark ("$bench", "$BENCH", ".../ucclzip-bench"), a "--" before a command that a helper
# runs, or an array's "(", then a subcommand and its arguments up to the end of the command (a
# pipe, redirection, separator, closing parenthesis or the line's end, once continuation lines
# are joined). A subcommand's name in a message ("sendrecv ... failed") is not a command.
COMMAND = re.compile(r"(?:(?:bench|BENCH)\w*\"?|\s--|\()\s*(" + "|".join(SUBCOMMANDS) + r")((?:\s+[^\s|;&)<>]+)+)")
FLAG = re.compile(r"^(-{1,2}[A-Za-z][A-Za-z0-9_]*)(=.*)?$")
HELP_FLAG = re.compile(r"^  (-{1,2}[A-Za-z][A-Za-z0-9_]*)(=|$)")


def known_flags(bench, subcommand):
    out = subprocess.run([bench, subcommand, "--help"], capture_output=True, text=True, timeout=60)
    flags = {m.group(1) for line in (out.stdout + out.stderr).splitlines() if (m := HELP_FLAG.match(line))}
    if not flags:
        sys.exit(f"{bench} {subcommand} --help listed no flags")
    return flags | {"--help"}


def commands(path):
    """(line number, subcommand, [flags]) of every command in the file, comments left out."""
    text = open(path, encoding="utf-8").read()
    lines, number, joined = [], 0, ""
    for raw in text.splitlines():
        number += 1
        if raw.lstrip().startswith("#"):
            continue
        if not joined:
            start = number
        joined += raw.rstrip("\\") + " "
        if not raw.endswith("\\"):
            lines.append((start, joined))
            joined = ""
    for start, line in lines:
        for m in COMMAND.finditer(line):
            flags = [f.group(1) for token in m.group(2).split() if (f := FLAG.match(token.strip("\"'")))]
            yield start, m.group(1), flags


def main():
    bench, files = sys.argv[1], sys.argv[2:]
    known = {s: known_flags(bench, s) for s in SUBCOMMANDS}
    wrong = checked = 0
    for path in files:
        parsed = subprocess.run(["bash", "-n", path], capture_output=True, text=True)
        if parsed.returncode != 0:
            wrong += 1
            print(f"{path}: bash cannot parse it: {parsed.stderr.strip()}")
        for line, subcommand, flags in commands(path):
            for flag in flags:
                checked += 1
                if flag not in known[subcommand]:
                    wrong += 1
                    print(f"{path}:{line}: ucclzip-bench {subcommand} does not read {flag}")
    print(f"{len(files)} scripts parsed and {checked} flags checked: {wrong} problems")
    if checked == 0:
        sys.exit("no flag found: the pattern no longer matches the scripts")
    sys.exit(1 if wrong else 0)


if __name__ == "__main__":
    main()
