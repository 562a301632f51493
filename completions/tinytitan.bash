# shellcheck shell=bash
# bash completion for tinytitan: generated from the CLI by tools/manual.py (do not edit).
# Install: tinytitan completion bash > ~/.local/share/bash-completion/completions/tinytitan

# the subcommands of a command
_tinytitan_commands() {
    case "$1" in
        "") echo "serve count-tokens compact chat launch completion models" ;;
        "models") echo "pull rm" ;;
    esac
}

# a command's options
_tinytitan_options() {
    case "$1" in
        "") echo "--version --help" ;;
        "serve") echo "--model --model-id --stub --max-context --reasoning --thinking --models-dir --host --port --api-key --cors-origin --queue-limit --max-concurrent --log-level --prompt-cache-entries --prompt-cache-mib --prompt-cache-dir --prompt-cache-disk-mib --strip-cli-prompt --strip-tags --keepalive --websockets --no-websockets --websocket-max-age --dtype --parallel --distributed-timeout --memory --no-memory --memory-tools --memory-tool-rounds --memory-dir --memory-fsync --memory-max-records --memory-max-mib --max-images --max-image-mib --max-image-pixels --allow-image-urls --temperature --top-p --top-k --min-p --repetition-penalty --drafts --no-drafts --draft-model --kv-bits --kv-group-size --quantized-kv-start --max-kv-memory --help" ;;
        "count-tokens") echo "--api --model --model-id --stub --max-context --reasoning --thinking --json --help" ;;
        "compact") echo "--model --model-id --stub --max-context --max-tokens --instructions --json --help" ;;
        "chat") echo "--url --model --stub --max-context --reasoning --thinking --api-key --system --max-tokens --tools --image --memory --no-memory --memory-dir --help" ;;
        "launch") echo "--url --model --model-id --stub --max-context --reasoning --thinking --api-key --code-mode --force --help" ;;
        "completion") echo "--help" ;;
        "models") echo "--models-dir --url --api-key --cache-dir --json --help" ;;
        "models pull") echo "--cache-dir --help" ;;
        "models rm") echo "--yes -y --cache-dir --help" ;;
    esac
}

# a command's options that take a value
_tinytitan_valued() {
    case "$1" in
        "serve") echo "--model --model-id --stub --max-context --reasoning --thinking --models-dir --host --port --api-key --cors-origin --queue-limit --max-concurrent --log-level --prompt-cache-entries --prompt-cache-mib --prompt-cache-dir --prompt-cache-disk-mib --strip-tags --keepalive --websocket-max-age --dtype --parallel --distributed-timeout --memory-tools --memory-tool-rounds --memory-dir --memory-max-records --memory-max-mib --max-images --max-image-mib --max-image-pixels --temperature --top-p --top-k --min-p --repetition-penalty --draft-model --kv-bits --kv-group-size --quantized-kv-start --max-kv-memory" ;;
        "count-tokens") echo "--api --model --model-id --stub --max-context --reasoning --thinking" ;;
        "compact") echo "--model --model-id --stub --max-context --max-tokens --instructions" ;;
        "chat") echo "--url --model --stub --max-context --reasoning --thinking --api-key --system --max-tokens --image --memory-dir" ;;
        "launch") echo "--url --model --model-id --stub --max-context --reasoning --thinking --api-key" ;;
        "models") echo "--models-dir --url --api-key --cache-dir" ;;
        "models pull") echo "--cache-dir" ;;
        "models rm") echo "--cache-dir" ;;
    esac
}

# what an option's value (or ARG, a positional argument) completes to
_tinytitan_values() {
    case "$1 $2" in
        "serve --model") echo "@file" ;;
        "serve --stub") echo "@file" ;;
        "serve --reasoning") echo "off on minimal low medium high xhigh max" ;;
        "serve --thinking") echo "on off" ;;
        "serve --models-dir") echo "@dir" ;;
        "serve --prompt-cache-dir") echo "@dir" ;;
        "serve --parallel") echo "auto tensor pipeline" ;;
        "serve --memory-tools") echo "off minimal full" ;;
        "serve --memory-dir") echo "@dir" ;;
        "serve --kv-bits") echo "4 8" ;;
        "serve --kv-group-size") echo "32 64 128" ;;
        "count-tokens --api") echo "chat responses messages" ;;
        "count-tokens --model") echo "@file" ;;
        "count-tokens --stub") echo "@file" ;;
        "count-tokens --reasoning") echo "off on minimal low medium high xhigh max" ;;
        "count-tokens --thinking") echo "on off" ;;
        "count-tokens ARG") echo "@file" ;;
        "compact --model") echo "@file" ;;
        "compact --stub") echo "@file" ;;
        "compact ARG") echo "@file" ;;
        "chat --model") echo "@file" ;;
        "chat --stub") echo "@file" ;;
        "chat --reasoning") echo "off on minimal low medium high xhigh max" ;;
        "chat --thinking") echo "on off" ;;
        "chat --image") echo "@file" ;;
        "chat --memory-dir") echo "@dir" ;;
        "launch --model") echo "@file" ;;
        "launch --stub") echo "@file" ;;
        "launch --reasoning") echo "off on minimal low medium high xhigh max" ;;
        "launch --thinking") echo "on off" ;;
        "completion ARG") echo "bash zsh fish" ;;
        "models --models-dir") echo "@dir" ;;
        "models --cache-dir") echo "@dir" ;;
        "models pull --cache-dir") echo "@dir" ;;
        "models rm --cache-dir") echo "@dir" ;;
    esac
}

_tinytitan() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="" path="" word values i skip=0
    for (( i = 1; i < COMP_CWORD; i++ )); do
        word="${COMP_WORDS[i]}"
        if (( skip )); then
            [[ "$word" == "=" ]] || skip=0  # --opt=value arrives as --opt, =, value
            continue
        fi
        if [[ " $(_tinytitan_valued "$path") " == *" $word "* ]]; then
            skip=1
        elif [[ "$word" != -* && " $(_tinytitan_commands "$path") " == *" $word "* ]]; then
            path="${path:+$path }$word"
        fi
    done
    (( COMP_CWORD > 1 )) && prev="${COMP_WORDS[COMP_CWORD-1]}"
    if [[ "$cur" == "=" ]]; then
        cur=""
    elif [[ "$prev" == "=" ]]; then
        prev="${COMP_WORDS[COMP_CWORD-2]}"
    fi
    COMPREPLY=()
    if [[ -n "$prev" && " $(_tinytitan_valued "$path") " == *" $prev "* ]]; then
        values="$(_tinytitan_values "$path" "$prev")"
    elif [[ "$cur" == -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$(_tinytitan_options "$path")" -- "$cur")
        return 0
    else
        mapfile -t COMPREPLY < <(compgen -W "$(_tinytitan_commands "$path")" -- "$cur")
        (( ${#COMPREPLY[@]} )) && return 0
        values="$(_tinytitan_values "$path" ARG)"
    fi
    case "$values" in
        @file) compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -f -- "$cur") ;;
        @dir) compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -d -- "$cur") ;;
        ?*) mapfile -t COMPREPLY < <(compgen -W "$values" -- "$cur") ;;
    esac
    return 0
}

complete -F _tinytitan tinytitan
