# bash completion for lyh(1), the LianYaoHu command line.
# shellcheck disable=SC2207 # COMPREPLY=($(compgen ...)) with IFS set to a newline
# Installed as share/bash-completion/completions/lyh.

# VPN interfaces: /sys/class/net entries named like the common VPN clients'
# (common/vpn_names.h; _LYH_SYS_NET overrides the directory, for tests).
_lyh_vpn_ifaces() {
    local d n net=${_LYH_SYS_NET:-/sys/class/net}
    for d in "$net"/tun* "$net"/wg* "$net"/tailscale* "$net"/nordlynx "$net"/proton* \
        "$net"/mullvad-*; do
        [[ -e $d ]] || continue
        n=${d##*/}
        printf '%s\n' "$n"
    done
}

# Session ids from `lyh sessions --json` (JSON Lines with an "id" field);
# nothing at all when the daemon is not reachable.
_lyh_session_ids() {
    local lyh=${_lyh_prog:-lyh}
    local -a to=()
    command -v timeout >/dev/null 2>&1 && to=(timeout 3)
    "${to[@]}" "$lyh" "${_lyh_global[@]}" sessions --json 2>/dev/null </dev/null |
        sed -n 's/.*"id":"\([^"]*\)".*/\1/p' 2>/dev/null
}

# Background session names from `lyh ls --json` (a "name" field per line).
_lyh_held_names() {
    local lyh=${_lyh_prog:-lyh}
    local -a to=()
    command -v timeout >/dev/null 2>&1 && to=(timeout 3)
    "${to[@]}" "$lyh" ls --json 2>/dev/null </dev/null |
        sed -n 's/.*"name":"\([^"]*\)".*/\1/p' 2>/dev/null
}

# COMPREPLY = file (-f) or directory (-d) names starting with $2.
_lyh_compgen_files() {
    compopt -o filenames 2>/dev/null
    local IFS=$'\n'
    COMPREPLY=($(compgen "$1" -- "$2"))
}

# COMPREPLY = the words of $1 (whitespace-separated) that start with $2.
_lyh_compgen_words() {
    local words
    # shellcheck disable=SC2086
    words=$(printf '%s\n' $1)
    local IFS=$'\n'
    COMPREPLY=($(compgen -W "$words" -- "$2"))
}

_lyh() {
    local cur prev
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=""
    ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
    COMPREPLY=()

    local _lyh_prog=${COMP_WORDS[0]}
    local -a _lyh_global=()
    local commands="run install uninstall sessions stop attach ls kill status capabilities doctor audit policy config"
    local global_opts="--socket --version --help"

    # Find the command (skipping global options) and the subcommand.
    local i cmd="" sub="" dashdash=0
    for ((i = 1; i < COMP_CWORD; i++)); do
        local w=${COMP_WORDS[i]}
        if [[ -z $cmd ]]; then
            case $w in
            --socket) _lyh_global+=(--socket "${COMP_WORDS[i + 1]}"); ((i++)) ;;
            --socket=*) _lyh_global+=("$w") ;;
            -*) ;;
            *) cmd=$w ;;
            esac
        elif [[ $w == -- ]]; then
            dashdash=1
            break
        elif [[ -z $sub && $w != -* ]]; then
            case $cmd in
            audit | policy | config) sub=$w ;;
            esac
        fi
    done

    # After `lyh run ... --`: the agent's command line.
    if ((dashdash)); then
        local IFS=$'\n'
        COMPREPLY=($(compgen -c -- "$cur" | sort -u))
        return 0
    fi

    # Option arguments.
    case $prev in
    --socket)
        _lyh_compgen_files -f "$cur"
        return 0
        ;;
    --vpn) # lyh run also takes none: proxy-only mode
        _lyh_compgen_words "$(_lyh_vpn_ifaces; [[ $cmd == run ]] && echo none)" "$cur"
        return 0
        ;;
    --session)
        _lyh_compgen_words "$(_lyh_session_ids)" "$cur"
        return 0
        ;;
    --cwd | --writable | --allow-socket)
        _lyh_compgen_files -d "$cur"
        return 0
        ;;
    --read-only) # lyh run's takes a path; lyh attach's is a switch
        if [[ $cmd == run ]]; then
            _lyh_compgen_files -d "$cur"
            return 0
        fi
        ;;
    --user)
        COMPREPLY=($(compgen -u -- "$cur"))
        return 0
        ;;
    --config | --monitor-to)
        _lyh_compgen_files -f "$cur"
        return 0
        ;;
    --verdict)
        _lyh_compgen_words "allowed denied" "$cur"
        return 0
        ;;
    --proto)
        _lyh_compgen_words "tcp udp icmp icmpv6 sctp udplite" "$cur"
        return 0
        ;;
    --kind)
        _lyh_compgen_words "flow session policy request gap guard dns" "$cur"
        return 0
        ;;
    --uid)
        COMPREPLY=($(compgen -u -- "$cur"))
        return 0
        ;;
    --env | --allow-dest | --deny-dest | --lan-allow | --since | --until | --dst | --port | \
        --limit | --expect-version | --dns | --allow-domain | --allow-host-port | --name | \
        --grace)
        return 0
        ;;
    esac

    if [[ -z $cmd ]]; then
        if [[ $cur == -* ]]; then
            _lyh_compgen_words "$global_opts" "$cur"
        else
            _lyh_compgen_words "$commands" "$cur"
        fi
        return 0
    fi

    local opts=
    local audit_filters="--since --until --session --uid --verdict --dst --port --proto --kind"
    case $cmd in
    run)
        opts="--vpn --cwd --env --allow-dest --deny-dest --lan-allow --writable --read-only
              --narrow-home --allow-non-default-route --no-firewall --shared-user-firewall
              --print-firewall --print-policy --no-tui --name --detach -d --monitor --monitor-to --quiet --timing --config --no-config
              --trust-project --dns --allow-domain --allow-host-port --allow-socket --socket
              --help --"
        ;;
    install) opts="--vpn --lan-allow --allow-non-default-route --help" ;;
    uninstall) opts="--help" ;;
    sessions | status | capabilities | doctor) opts="--json --help" ;;
    stop)
        if [[ $cur == -* ]]; then
            opts="--grace --help"
        else
            _lyh_compgen_words "$(_lyh_session_ids)" "$cur"
            return 0
        fi
        ;;
    attach | kill)
        if [[ $cur == -* ]]; then
            [[ $cmd == attach ]] && opts="--read-only --user --help" || opts="--grace --help"
        else
            _lyh_compgen_words "$(_lyh_held_names)" "$cur"
            return 0
        fi
        ;;
    ls) opts="--json --user --help" ;;
    audit)
        if [[ -z $sub ]]; then
            if [[ $cur == -* ]]; then
                _lyh_compgen_words "--help" "$cur"
            else
                _lyh_compgen_words "query follow summary export" "$cur"
            fi
            return 0
        fi
        case $sub in
        query) opts="$audit_filters --name --limit --json --csv --help" ;;
        follow) opts="${audit_filters/--until /} --name --limit --json --help" ;;
        summary) opts="${audit_filters/ --kind/} --by-name --name --json --help" ;;
        export) opts="$audit_filters --json --help" ;;
        esac
        ;;
    policy)
        if [[ -z $sub ]]; then
            if [[ $cur == -* ]]; then
                _lyh_compgen_words "--help" "$cur"
            else
                _lyh_compgen_words "get set diff history rollback" "$cur"
            fi
            return 0
        fi
        case $sub in
        get) opts="--json --toml --help" ;;
        set | diff)
            opts="--expect-version --dry-run --json --help"
            [[ $sub == diff ]] && opts="--json --help"
            if [[ $cur != -* ]]; then
                _lyh_compgen_files -f "$cur"
                [[ - == "$cur"* ]] && COMPREPLY+=(-)
                return 0
            fi
            ;;
        history) opts="--json --help" ;;
        rollback) opts="--expect-version --dry-run --json --help" ;;
        esac
        ;;
    config)
        if [[ -z $sub ]]; then
            if [[ $cur == -* ]]; then
                _lyh_compgen_words "--help" "$cur"
            else
                _lyh_compgen_words "edit show path trust revoke" "$cur"
            fi
            return 0
        fi
        case $sub in
        show) opts="--origin --config --no-config --trust-project --help" ;;
        path) opts="--help" ;;
        trust | revoke)
            opts="--help"
            if [[ $cur != -* ]]; then
                _lyh_compgen_files -d "$cur"
                return 0
            fi
            ;;
        esac
        ;;
    *) return 0 ;;
    esac

    _lyh_compgen_words "$opts" "$cur"
    return 0
}

complete -F _lyh lyh
