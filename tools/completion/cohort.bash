# bash completion for cohort's tools: cohortrun, cohort-store, cohort-kv,
# cohort-perf, cohort-trace, cohort-soak. Installed once per tool under
# share/bash-completion/completions/ (bash-completion loads it on first use);
# or source it from ~/.bashrc.
#
# Option names come from the tool's own --help (cached per tool), so they
# follow the tool; values are completed where the set is known.

_cohort_help_opts()
{
    local tool=$1 var=_cohort_opts_${1//-/_}
    if [[ -z ${!var-} ]]; then
        printf -v "$var" '%s' "$("$tool" --help 2>&1 | grep -o -- '--[A-Za-z][A-Za-z0-9_-]*' | sort -u)"
    fi
    printf '%s\n' "${!var}"
}

_cohort_complete()
{
    local cur prev words cword
    if declare -F _init_completion >/dev/null; then
        _init_completion -s || return
    else
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD-1]}
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    fi
    local tool=${words[0]##*/}

    # Values of options that take one.
    case "$prev" in
        --token-file|--json-out|-J|--output_file|--state|--log|--timeline)
            COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --log-dir)
            COMPREPLY=($(compgen -d -- "$cur")); return ;;
        --transport)
            COMPREPLY=($(compgen -W "auto shm tcp" -- "$cur")); return ;;
        --contract)
            COMPREPLY=($(compgen -W "on off" -- "$cur")); return ;;
        --bind)
            [[ $tool == cohort-perf ]] && { COMPREPLY=($(compgen -W "none auto core" -- "$cur")); return; }
            return ;;
        --bind-to|--bind_to)
            COMPREPLY=($(compgen -W "none auto core" -- "$cur")); return ;;
        --rdzv-backend|--rdzv_backend)
            COMPREPLY=($(compgen -W "c10d static" -- "$cur")); return ;;
        --nproc-per-node|--nproc_per_node)
            COMPREPLY=($(compgen -W "auto cpu" -- "$cur")); return ;;
        -d|--datatype)
            COMPREPLY=($(compgen -W "all int8 uint8 int32 uint32 int64 uint64 half float double bfloat16" -- "$cur")); return ;;
        -o|--op)
            COMPREPLY=($(compgen -W "all sum prod min max avg band bor bxor" -- "$cur")); return ;;
        --coll)
            COMPREPLY=($(compgen -W "all all_reduce broadcast reduce all_gather gather scatter reduce_scatter all_to_all barrier sendrecv" -- "$cur")); return ;;
        --in-place)
            COMPREPLY=($(compgen -W "yes no" -- "$cur")); return ;;
        -a|--average)
            COMPREPLY=($(compgen -W "0 1 2 3" -- "$cur")); return ;;
        -np|--nnodes|--node-rank|--node_rank|--max-restarts|--max_restarts|--grace-ms|--master|--master-addr|--master_addr|--master-port|--master_port|--rdzv-endpoint|--rdzv_endpoint|--rdzv-id|--rdzv_id|--store|--job-id|--job_id|--join-timeout-ms|--listen|--max-key|--max-value|--max-clients|--max-memory|--frame-timeout|--auth-timeout|--max-unauth|--addr|--job|--prefix|--interval|--count|--timeout|--connect-timeout|--max-job-memory|--max-conn-memory|--torch-listen|--torch-job|-b|--minbytes|-e|--maxbytes|-f|--stepfactor|-i|--stepbytes|-r|--root|-n|--iters|-w|--warmup_iters|-m|--agg_iters|-c|--check|-T|--time|--timeout|-t|--nthreads|-g|--ngpus|--np|--sizes|--max-iters|--algo|--deadline|--prewarm|-l|--label|--until|--fault-every)
            return ;;
    esac

    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_cohort_help_opts "${words[0]}")" -- "$cur"))
        [[ ${COMPREPLY-} == *= ]] && compopt -o nospace
        return
    fi

    case "$tool" in
        cohortrun)
            # The program to start, or (after it) its arguments.
            COMPREPLY=($(compgen -c -- "$cur") $(compgen -f -- "$cur")) ;;
        cohort-kv)
            local cmds="set get add append compare-set cas wait watch delete list num-keys ping stats set-generation" w
            for w in "${words[@]:1:cword-1}"; do
                [[ " $cmds " == *" $w "* ]] && return
            done
            COMPREPLY=($(compgen -W "$cmds" -- "$cur")) ;;
        cohort-trace)
            COMPREPLY=($(compgen -d -- "$cur")) ;;
    esac
}

complete -F _cohort_complete cohortrun cohort-store cohort-kv cohort-perf cohort-trace cohort-soak
