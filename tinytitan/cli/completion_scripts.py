"""The text of the bash, zsh and fish completion scripts, from ``completion.specs``.

Values an option completes to are spelled the same way for all three: ``"a b c"`` (choices),
``"@file"``, ``"@dir"``, or ``""`` (free text: nothing to offer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tinytitan.cli.completion import Spec

__all__ = ["bash", "fish", "zsh"]

_HEADER = "# {shell} completion for tinytitan: generated from the CLI by tools/manual.py (do not edit).\n"
_INSTALL = {
    "bash": "tinytitan completion bash > ~/.local/share/bash-completion/completions/tinytitan",
    "zsh": "tinytitan completion zsh > ~/.zfunc/_tinytitan  (with fpath+=~/.zfunc before compinit)",
    "fish": "tinytitan completion fish > ~/.config/fish/completions/tinytitan.fish",
}


def _key(spec: Spec) -> str:
    return " ".join(spec.path)


def _case(name: str, doc: str, arms: list[tuple[str, str]], subject: str = '"$1"') -> list[str]:
    out = [f"# {doc}", f"_tinytitan_{name}() {{", f"    case {subject} in"]
    out += [f'        "{pattern}") echo "{words}" ;;' for pattern, words in arms if words]
    return [*out, "    esac", "}", ""]


def bash(specs: list[Spec]) -> str:
    values: list[tuple[str, str]] = []
    for spec in specs:
        values += [(f"{_key(spec)} {name}", o.values) for o in spec.options for name in o.names]
        values.append((f"{_key(spec)} ARG", spec.positional))
    out = [
        "# shellcheck shell=bash",
        _HEADER.format(shell="bash").rstrip(),
        f"# Install: {_INSTALL['bash']}",
        "",
        *_case("commands", "the subcommands of a command", [(_key(s), " ".join(s.commands)) for s in specs]),
        *_case(
            "options",
            "a command's options",
            [(_key(s), " ".join(n for o in s.options for n in o.names)) for s in specs],
        ),
        *_case(
            "valued",
            "a command's options that take a value",
            [(_key(s), " ".join(n for o in s.options if o.takes_value for n in o.names)) for s in specs],
        ),
        *_case("values", "what an option's value (or ARG, a positional argument) completes to", values, '"$1 $2"'),
        _BASH_MAIN,
    ]
    return "\n".join(out)


_BASH_MAIN = r"""_tinytitan() {
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
"""


def _zsh_quote(text: str) -> str:
    return text.replace("'", "'\\''")


def _zsh_help(text: str) -> str:
    return _zsh_quote(text.replace("\\", "\\\\").replace("[", "(").replace("]", ")"))


def _zsh_action(values: str) -> str:
    if values == "@file":
        return "_files"
    if values == "@dir":
        return "_files -/"
    return f"({values})" if values else " "


def _zsh_function(spec: Spec) -> list[str]:
    name = "_tinytitan" + "".join("_" + word.replace("-", "_") for word in spec.path)
    args: list[str] = []
    for option in spec.options:
        exclusive = f"({' '.join(option.names)})" if len(option.names) > 1 else ""
        for flag in option.names:
            help_text = _zsh_help(option.help)
            if option.takes_value:
                message = _zsh_quote((option.metavar or "value").replace(":", "\\:"))
                spec_text = f"{exclusive}{flag}=[{help_text}]:{message}:{_zsh_action(option.values)}"
            else:
                spec_text = f"{exclusive}{flag}[{help_text}]"
            args.append(f"'{spec_text}'")
    body = [f"{name}() {{"]
    if spec.commands:
        body += ['    local curcontext="$curcontext" state line', "    _arguments -C -s \\"]
        body += [f"        {arg} \\" for arg in args]
        body += ["        '1: :->command' \\", "        '*:: :->args'", '    case "$state" in', "        command)"]
        body += ["            local -a commands=("]
        body += [f"                '{_zsh_quote(sub)}:{_zsh_help(text)}'" for sub, text in spec.commands.items()]
        body += ["            )", "            _describe -t commands command commands ;;", "        args)"]
        body += ['            case "$line[1]" in']
        body += [f"                {sub}) {name}_{sub.replace('-', '_')} ;;" for sub in spec.commands]
        body += ["            esac ;;", "    esac"]
    else:
        message = _zsh_quote((spec.positional_metavar or "argument").replace(":", "\\:"))
        positional = [f"'1:{message}:{_zsh_action(spec.positional)}'"] if spec.positional else []
        body += ["    _arguments -s \\"]
        body += [f"        {arg} \\" for arg in [*args, *positional]]
        body[-1] = body[-1].removesuffix(" \\")
    return [*body, "}", ""]


def zsh(specs: list[Spec]) -> str:
    out = ["#compdef tinytitan", _HEADER.format(shell="zsh").rstrip(), f"# Install: {_INSTALL['zsh']}", ""]
    for spec in reversed(specs):  # helpers before the root function that calls them
        out += _zsh_function(spec)
    out += [
        'if [[ "${zsh_eval_context[-1]}" == loadautofunc ]]; then',
        '    _tinytitan "$@"',
        "else",
        "    compdef _tinytitan tinytitan",
        "fi",
        "",
    ]
    return "\n".join(out)


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_condition(spec: Spec) -> str:
    """True while the command line is at ``spec`` (not inside one of its subcommands)."""
    if not spec.path:
        return "__fish_use_subcommand"
    parts = [f"__fish_seen_subcommand_from {word}" for word in spec.path]
    if spec.commands:
        parts.append(f"not __fish_seen_subcommand_from {' '.join(spec.commands)}")
    return "; and ".join(parts)


def fish(specs: list[Spec]) -> str:
    out = [_HEADER.format(shell="fish").rstrip(), f"# Install: {_INSTALL['fish']}", "", "complete -c tinytitan -f"]
    for spec in specs:
        condition = _fish_quote(_fish_condition(spec))
        for sub, text in spec.commands.items():
            out.append(f"complete -c tinytitan -n {condition} -a {sub} -d {_fish_quote(text)}")
        if spec.positional == "@file":
            out.append(f"complete -c tinytitan -n {condition} -F")
        elif spec.positional and not spec.positional.startswith("@"):
            out.append(f"complete -c tinytitan -n {condition} -a {_fish_quote(spec.positional)}")
        for option in spec.options:
            for flag in option.names:
                name = f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}"
                value = ""
                if option.takes_value:
                    if option.values in ("@file", "@dir"):
                        value = " -r -F"
                    elif option.values:
                        value = f" -x -a {_fish_quote(option.values)}"
                    else:
                        value = " -x"
                out.append(f"complete -c tinytitan -n {condition} {name}{value} -d {_fish_quote(option.help)}")
        out.append("")
    return "\n".join(out)
