#!/usr/bin/env bash
# man_check.sh DLOCK_BINARY MAN_PAGE: the man page and the CLI's own help describe the same
# tool. Every command, option, exit code and environment variable that `dlock --help` and
# `dlock COMMAND --help` show must appear in the man page, and every command, option and exit
# code the man page names must exist in the help. Needs no server.
set -uo pipefail
dlock=$1 man=$2
fail=0
problem() { echo "man_check: $*" >&2; fail=1; }

top=$("$dlock" --help) || { echo "man_check: dlock --help failed" >&2; exit 1; }
# Commands: the lines of the "Subcommands:" block.
help_cmds=$(awk '/^[A-Za-z]+:$/ { in_sub = ($0 == "Subcommands:" || $0 == "SUBCOMMANDS:") ; next }
                 in_sub && /^  [a-z]/ { print $1 }' <<<"$top" | sort -u)
[ -n "$help_cmds" ] || problem "no commands found in dlock --help"
all_help=$top
for c in $help_cmds; do
  sub=$("$dlock" "$c" --help) || problem "dlock $c --help failed"
  all_help+=$'\n'"$sub"
done

# The man page as plain text: roff's \- is a dash.
man_text=$(sed 's/\\-/-/g' "$man")

help_opts=$(grep -oE -- '--[a-z][a-z-]*' <<<"$all_help" | sort -u)
man_opts=$(grep -oE -- '--[a-z][a-z-]*' <<<"$man_text" | sort -u)
man_cmds=$(awk '/^\.SH/ { in_cmds = ($2 == "COMMANDS") } in_cmds && /^\.SS / { print $2 }' "$man" | sort -u)
# Exit codes: the numbers the help's table lists, and the .TP/.B entries of EXIT STATUS.
help_codes=$(grep -oE '^  [0-9]+(\+N)?  ' <<<"$top" | tr -d ' ' | sort -u)
man_codes=$(awk '/^\.SH/ { in_exit = ($2 == "EXIT") } in_exit && prev == ".TP" && /^\.B [0-9]/ { print $2 }
                 { prev = $0 }' "$man" | sort -u)
help_env=$(grep -oE '\$DLOCK_[A-Z_]+' <<<"$all_help" | tr -d '$' | sort -u)

for c in $help_cmds; do grep -qx "$c" <<<"$man_cmds" || problem "command '$c' is not in the man page"; done
for c in $man_cmds; do grep -qx "$c" <<<"$help_cmds" || problem "the man page documents '$c', which dlock does not have"; done
for o in $help_opts; do grep -qx -- "$o" <<<"$man_opts" || problem "option $o is not in the man page"; done
for o in $man_opts; do grep -qx -- "$o" <<<"$help_opts" || problem "the man page names $o, which no --help shows"; done
[ -n "$help_codes" ] || problem "no exit codes found in dlock --help"
for x in $help_codes; do grep -qx -- "$x" <<<"$man_codes" || problem "exit code $x is not in the man page's EXIT STATUS"; done
for x in $man_codes; do
  [ "$x" = 0 ] && continue # success needs no line in the help's failure table
  grep -qx -- "$x" <<<"$help_codes" || problem "the man page lists exit code $x, which dlock --help does not"
done
for e in $help_env; do grep -q "^\.B $e\$" "$man" || problem "environment variable $e is not in the man page's ENVIRONMENT"; done
# The page must be valid roff (man's own checker, when installed).
if command -v groff >/dev/null; then
  warnings=$(groff -man -ww -z "$man" 2>&1) || problem "groff failed"
  [ -z "$warnings" ] || problem "groff warnings: $warnings"
fi
[ $fail -eq 0 ] && echo "ok: man page and --help agree ($(wc -w <<<"$help_cmds") commands, $(wc -w <<<"$help_opts") options, $(wc -w <<<"$help_codes") exit codes)"
exit $fail
