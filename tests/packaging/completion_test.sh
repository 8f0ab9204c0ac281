#!/usr/bin/env bash
# The bash completion (tools/dlock/completion/dlock.bash) against the CLI it completes:
# subcommands, each subcommand's options and the --kind / --scenario values must be exactly
# what `dlock --help` and `dlock SUB --help` list, so neither drifts; plus a few completions
# as a user would press TAB.
#   completion_test.sh DLOCK_BINARY COMPLETION_FILE
set -uo pipefail
dlock=$1
# shellcheck source=/dev/null
source "$2"
fails=0
fail() {
    echo "FAIL: $*" >&2
    fails=$((fails + 1))
}

# complete WORD... : COMPREPLY for the command line "WORD..." with the cursor on the last word,
# sorted, one line.
complete_line() {
    COMP_WORDS=("$@")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    _dlock
    printf '%s\n' "${COMPREPLY[@]}" | sort -u | tr '\n' ' ' | sed 's/ $//'
}
sorted() { tr ' ' '\n' | sed '/^$/d' | sort -u | tr '\n' ' ' | sed 's/ $//'; }

# The section of a help text that starts with a line "<Title>:" (CLI11 writes "Options:",
# "Subcommands:"), up to the next blank line.
section() { awk -v t="$1:" 'tolower($0) == tolower(t) { on = 1; next } on && /^$/ { on = 0 } on'; }
long_options() { section Options | grep -oE '^ +(-[a-zA-Z],)?--[a-z][a-z-]*' | grep -oE -- '--[a-z-]+'; }

top_help=$("$dlock" --help) || fail "dlock --help failed"
subs=$(printf '%s\n' "$top_help" | section Subcommands | awk '{ print $1 }' | sorted)
[ -n "$subs" ] || fail "no subcommands found in dlock --help"
got=$(complete_line dlock "")
[ "$got" = "$subs" ] || fail "dlock <TAB>: '$got', --help lists '$subs'"

globals=$(printf '%s\n' "$top_help" | long_options | sorted)
got=$(complete_line dlock --)
[ "$got" = "$globals" ] || fail "dlock --<TAB>: '$got', --help lists '$globals'"

for sub in $subs; do
    help=$("$dlock" "$sub" --help) || {
        fail "dlock $sub --help failed"
        continue
    }
    # The subcommand's own options, plus the global ones the completion also offers after it.
    want=$( (printf '%s\n' "$help" | long_options; echo --url; echo --help) | sorted)
    got=$(complete_line dlock "$sub" --)
    [ "$got" = "$want" ] || fail "dlock $sub --<TAB>: '$got', --help lists '$want'"
    for opt in --kind --scenario; do
        values=$(printf '%s\n' "$help" | grep -oE -- "^ +$opt [A-Z]+:\{[^}]*\}" | sed 's/.*{//; s/}//' | tr ',' ' ' | sorted)
        [ -n "$values" ] || continue
        got=$(complete_line dlock "$sub" "$opt" "")
        [ "$got" = "$values" ] || fail "dlock $sub $opt <TAB>: '$got', --help lists '$values'"
    done
done

# As a user types.
[ "$(complete_line dlock st)" = status ] || fail "dlock st<TAB> is not status"
[ "$(complete_line dlock exec --kind f)" = fair ] || fail "dlock exec --kind f<TAB> is not fair"
[ "$(complete_line dlock --url redis://h exec --kin)" = --kind ] || fail "options after --url"
[ "$(complete_line dlock exec job -- bas)" != "" ] || fail "no command completion after --"
case " $(complete_line dlock exec job -- bas) " in *" bash "*) ;; *) fail "'bas' after -- does not offer bash" ;; esac
[ -z "$(complete_line dlock exec --wait "")" ] || fail "--wait offers values"

if [ $fails -ne 0 ]; then
    echo "$fails failure(s)" >&2
    exit 1
fi
echo "completion matches --help for: $subs"
