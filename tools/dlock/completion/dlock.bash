# bash completion for dlock(1): subcommands, each subcommand's options, --kind and --scenario
# values. Installed as share/bash-completion/completions/dlock. The option lists mirror
# `dlock SUBCOMMAND --help`; tests/packaging/completion_test.sh checks both ways.

_dlock_subcommands="exec elect leader status list keys unlock demo bench"
_dlock_kinds="lock simple fair read write shedlock lease versioned semaphore"
_dlock_global_opts="--url --help --version"

# Options of one subcommand (the global ones are accepted after it too).
_dlock_options_of() {
    case $1 in
    exec) echo "--wait --lease --watchdog --kind --permits --kill-after --warn-signal --warn-margin --max-hold --once-per --taken-exit --on-failure" ;;
    elect) echo "--value --wait --kill-after --watchdog" ;;
    leader) echo "--json --watch" ;;
    status) echo "--json --watch --interval" ;;
    list) echo "--json --watch --interval" ;;
    keys) echo "--kind" ;;
    unlock) echo "--force" ;;
    demo) echo "--processes --threads --stock --backend" ;;
    bench) echo "--scenario --kind --workers --keys --seconds --json" ;;
    esac
}

_dlock() {
    local cur prev words cword
    if declare -F _init_completion >/dev/null 2>&1; then
        _init_completion -n =: || return
    else
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD - 1]}
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    fi

    # The first word that is a subcommand; after `exec NAME --` (or `elect NAME --`) the child's
    # command line follows.
    local i sub=""
    for ((i = 1; i < cword; i++)); do
        if [[ ${words[i]} == -- && ($sub == exec || $sub == elect) ]]; then
            # The child's command: complete commands, then files.
            if ((i + 1 == cword)); then
                mapfile -t COMPREPLY < <(compgen -c -- "$cur")
            else
                mapfile -t COMPREPLY < <(compgen -f -- "$cur")
            fi
            return 0
        fi
        if [[ -z $sub && " $_dlock_subcommands " == *" ${words[i]} "* ]]; then
            sub=${words[i]}
        fi
    done

    # Values of options that take one.
    case $prev in
    --kind)
        mapfile -t COMPREPLY < <(compgen -W "$_dlock_kinds" -- "$cur")
        return 0
        ;;
    --scenario)
        mapfile -t COMPREPLY < <(compgen -W "A B C D" -- "$cur")
        return 0
        ;;
    --backend)
        mapfile -t COMPREPLY < <(compgen -W "redis zookeeper postgresql etcd" -- "$cur")
        return 0
        ;;
    --url)
        mapfile -t COMPREPLY < <(compgen -W "redis:// rediss:// unix:// zk:// postgresql:// etcd:// etcds://" -- "$cur")
        compopt -o nospace 2>/dev/null
        return 0
        ;;
    --on-failure)
        mapfile -t COMPREPLY < <(compgen -W "keep release" -- "$cur")
        return 0
        ;;
    --warn-signal)
        mapfile -t COMPREPLY < <(compgen -W "USR1 USR2 HUP INT TERM QUIT ALRM" -- "$cur")
        return 0
        ;;
    --wait | --lease | --watchdog | --kill-after | --warn-margin | --max-hold | --once-per | --taken-exit | --seconds | --processes | --threads | \
        --stock | --workers | --keys | --interval | --permits)
        return 0 # a number or a duration: nothing to offer
        ;;
    esac

    if [[ -z $sub ]]; then
        if [[ $cur == -* ]]; then
            mapfile -t COMPREPLY < <(compgen -W "$_dlock_global_opts" -- "$cur")
        else
            mapfile -t COMPREPLY < <(compgen -W "$_dlock_subcommands" -- "$cur")
        fi
        return 0
    fi
    if [[ $cur == -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$(_dlock_options_of "$sub") --url --help" -- "$cur")
    fi
    return 0
}
complete -F _dlock dlock
