"""Generate the man page and the shell completion scripts from the Typer app itself.

    python tools/manual.py          # write man/tinytitan.1 and completions/*
    python tools/manual.py --check  # exit 1 (naming the stale files) when they differ from the app

Everything comes from the app's own commands, options, help texts and epilogs; the environment
variables that are not an option's are described in ``EXTRA_ENVIRONMENT`` below, and every
``TINYTITAN_*`` name in the package's source must be described one way or the other.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROG = "tinytitan"
COMPLETE_VAR = "_TINYTITAN_COMPLETE"
COMPLETIONS = {"bash": "tinytitan.bash", "zsh": "_tinytitan", "fish": "tinytitan.fish"}
_ENV_NAME = re.compile(r"\bTINYTITAN_[A-Z0-9_]+\b")

# Variables that are not an option's envvar (internal ones say so and are documented anyway).
EXTRA_ENVIRONMENT: dict[str, str] = {
    "TINYTITAN_OPENBLAS": "0 turns off the one re-exec with Debian's OpenBLAS preloaded (the fast Linux CPU path).",
    "TINYTITAN_OPENBLAS_REEXEC": "Internal: set in the re-executed process so it does not re-exec again.",
    "TINYTITAN_CACHE_DIR": "Where TinyTitan caches what it builds (converted GGUF models, the test model); "
    "default $XDG_CACHE_HOME/tinytitan or ~/.cache/tinytitan.",
}
OTHER_ENVIRONMENT: dict[str, str] = {
    "HF_HUB_OFFLINE": "1: use only the Hugging Face cache (a model that is not cached is a clear error).",
    "HF_HOME, HF_HUB_CACHE": "Where the Hugging Face cache lives (default ~/.cache/huggingface/hub).",
    "OLLAMA_MODELS": "Ollama's model store, listed by tinytitan models (default ~/.ollama/models).",
    "XDG_DATA_HOME, XDG_CACHE_HOME": "Base directories for the chat history and the caches.",
}
FILES: list[tuple[str, str]] = [
    ("~/.cache/tinytitan/", "Converted GGUF models (keyed by the file's digest) and the test model."),
    ("~/.cache/huggingface/hub/", "Hugging Face models: serve --model ORG/NAME and tinytitan models pull."),
    ("~/.local/share/tinytitan/chat_history", "The history of tinytitan chat's prompt."),
    ("~/.local/share/tinytitan/memory/", "Agent memory journals, one per workspace (serve --memory)."),
    ("--prompt-cache-dir DIR", "The prompt cache's disk tier: KV snapshots kept across restarts."),
]
EXIT_STATUS: list[tuple[str, str]] = [
    ("0", "Success (serve: stopped cleanly)."),
    ("1", "A chat in pipe mode had a failed message; an unexpected error."),
    ("2", "A usage or setup error: a bad flag, a model that cannot be loaded, a server that is down."),
    ("130", "Interrupted (Ctrl-C)."),
]


def _app() -> Any:
    import typer.main

    from tinytitan.cli.app import app

    return typer.main.get_command(app)


def _roff(text: str) -> str:
    """Escape text for roff: backslashes, leading dots and quotes, and hyphens in option names."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + line) if line.startswith((".", "'")) else line for line in text.splitlines())


def _commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    for name in sorted(group.commands, key=lambda n: list(group.commands).index(n)):
        command = group.commands[name]
        if getattr(command, "hidden", False):
            continue
        yield (*path, name), command
        if hasattr(command, "commands"):
            yield from _commands(command, (*path, name))


def _param_lines(param: Any) -> list[str]:
    if getattr(param, "hidden", False):
        return []
    if type(param).__name__.endswith("Argument"):
        head = f"\\fI{_roff(param.metavar or param.name.upper())}\\fR"
    else:
        names = ", ".join(f"\\fB{_roff(opt)}\\fR" for opt in param.opts)
        metavar = "" if getattr(param, "is_flag", False) else (param.metavar or param.name.upper())
        head = names + (f" \\fI{_roff(metavar)}\\fR" if metavar else "")
    notes = []
    envvar = getattr(param, "envvar", None)
    if envvar:
        notes.append(f"env {envvar}")
    default = param.default
    if default not in (None, False, (), []) and not callable(default):
        notes.append(f"default {default}")
    text = (getattr(param, "help", None) or "").strip()
    if notes:
        text = f"{text} [{'; '.join(notes)}]".strip()
    return [".TP", head, _roff(text) if text else ""]


def _epilog(command: Any) -> str:
    return (getattr(command, "epilog", None) or "").strip()


def man_page() -> str:
    from tinytitan import __version__

    root = _app()
    out = [
        f'.TH TINYTITAN 1 "" "tinytitan {__version__}" "User Commands"',
        ".SH NAME",
        "tinytitan \\- a local LLM server and CLI for coding agents",
        ".SH SYNOPSIS",
        f"\\fB{PROG}\\fR [\\fB\\-\\-version\\fR] \\fICOMMAND\\fR [\\fIOPTIONS\\fR]",
        ".SH DESCRIPTION",
        _roff((root.help or "").strip()),
        ".SH COMMANDS",
    ]
    examples: list[str] = []
    for path, command in _commands(root):
        usage = " ".join(path)
        out += [f".SS {PROG} {usage}", _roff((command.help or "").strip())]
        for param in command.params:
            out += _param_lines(param)
        if epilog := _epilog(command):
            examples.append(epilog)
    if examples:
        out.append(".SH EXAMPLES")
        for epilog in examples:
            out += [".nf", _roff(epilog), ".fi", ".PP"]
    out.append(".SH ENVIRONMENT")
    for name, text in sorted(environment().items()):
        out += [".TP", f"\\fB{_roff(name)}\\fR", _roff(text)]
    for name, text in OTHER_ENVIRONMENT.items():
        out += [".TP", f"\\fB{_roff(name)}\\fR", _roff(text)]
    out.append(".SH FILES")
    for name, text in FILES:
        out += [".TP", f"\\fI{_roff(name)}\\fR", _roff(text)]
    out.append(".SH EXIT STATUS")
    for code, text in EXIT_STATUS:
        out += [".TP", f"\\fB{code}\\fR", _roff(text)]
    out += [".SH SEE ALSO", "\\fBtinytitan\\fR \\fICOMMAND\\fR \\fB\\-\\-help\\fR, and the project's README."]
    return "\n".join(line for line in out if line is not None) + "\n"


def environment() -> dict[str, str]:
    """Every TINYTITAN_* variable: an option's (its help, and which commands read it) or an extra."""
    found: dict[str, tuple[str, list[str]]] = {}
    for path, command in _commands(_app()):
        for param in command.params:
            envvar = getattr(param, "envvar", None)
            for name in [envvar] if isinstance(envvar, str) else envvar or []:
                help_text = (getattr(param, "help", None) or "").strip()
                flag = param.opts[0] if param.opts else param.name
                entry = found.setdefault(name, (f"{flag}: {help_text}", []))
                entry[1].append(" ".join(path))
    described = {name: f"{text} ({', '.join(sorted(set(cmds)))})" for name, (text, cmds) in found.items()}
    return {**described, **EXTRA_ENVIRONMENT}


def undocumented_variables() -> list[str]:
    """TINYTITAN_* names used in the package's source that the man page would not describe."""
    used: set[str] = set()
    for path in (ROOT / "tinytitan").rglob("*.py"):
        used |= set(_ENV_NAME.findall(path.read_text(encoding="utf-8")))
    return sorted(used - set(environment()))


def completion(shell: str) -> str:
    from typer._completion_shared import get_completion_script

    return get_completion_script(prog_name=PROG, complete_var=COMPLETE_VAR, shell=shell).rstrip("\n") + "\n"


def generated() -> dict[Path, str]:
    files = {ROOT / "man" / "tinytitan.1": man_page()}
    for shell, name in COMPLETIONS.items():
        files[ROOT / "completions" / name] = completion(shell)
    return files


def main(argv: list[str]) -> int:
    missing = undocumented_variables()
    if missing:
        print(f"undocumented environment variables: {', '.join(missing)} (describe them in tools/manual.py)")
        return 1
    stale = [path for path, text in generated().items() if not path.exists() or path.read_text() != text]
    if "--check" in argv:
        for path in stale:
            print(f"stale: {path.relative_to(ROOT)} (run: python tools/manual.py)")
        return 1 if stale else 0
    for path, text in generated().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
