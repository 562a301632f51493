"""Generate the man page and the shell completion scripts from the Typer app itself.

    python tools/manual.py          # write man/tinytitan.1 and completions/*
    python tools/manual.py --check  # exit 1 (naming the stale files) when they differ from the app

Everything comes from the app's own commands, options, help texts and examples
(``tinytitan.cli.examples``); the environment variables that are not an option's are described in
``EXTRA_ENVIRONMENT`` below, and every ``TINYTITAN_*`` name in the package's source must be
described one way or the other (``--check`` fails otherwise).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROG = "tinytitan"
COMPLETIONS = {"bash": "tinytitan.bash", "zsh": "_tinytitan", "fish": "tinytitan.fish"}
_ENV_NAME = re.compile(r"(?<![A-Za-z0-9])_?TINYTITAN_[A-Z0-9_]*[A-Z0-9]")

# Variables that are not an option's envvar (internal ones say so and are documented anyway).
EXTRA_ENVIRONMENT: dict[str, str] = {
    "TINYTITAN_OPENBLAS": "0 turns off the one re-exec with a Debian BLAS preloaded (the fast Linux CPU path).",
    "TINYTITAN_BLAS": "Which BLAS the Linux CPU re-exec preloads: auto (BLIS when installed, else OpenBLAS; "
    "the default), blis, openblas or off; any other value is refused (exit 2).",
    "TINYTITAN_CPU_SHARE": "off keeps the preloaded BLAS's thread count fixed; by default serve gives it only "
    "the cores other processes leave free (every core on a quiet machine).",
    "_TINYTITAN_OPENBLAS_REEXEC": "Internal: set in the re-executed process so it does not re-exec again.",
    "_TINYTITAN_SIGINT_HELD": "Internal: the re-exec blocked Ctrl-C through the new interpreter's start-up.",
    "_TINYTITAN_BLIS_KERNELS": "Internal: the BLIS kernel set the re-exec chose (with BLIS_ARCH_TYPE) on a CPU "
    "BLIS does not know, for the banner.",
    "TINYTITAN_DEVICE_CHECK": "1: debugging and tests: any MLX call off the engine's device thread raises "
    "a RuntimeError naming the function and the thread.",
    "TINYTITAN_CACHE_DIR": "Where TinyTitan caches what it builds (converted GGUF models, the test model); "
    "default $XDG_CACHE_HOME/tinytitan or ~/.cache/tinytitan.",
    "TINYTITAN_LAUNCH_KEY": "Set by tinytitan launch for the agent it runs: the server's API key "
    "(Codex, pi and OpenCode read it from there).",
    "TINYTITAN_JS_TIKTOKEN": "Tests only: where js-tiktoken's o200k_base ranks are "
    "(default tests/data/node_modules/js-tiktoken), for the tiny gpt-oss test model.",
}
# Option variables some command also reads without having the option (see chat/connect.py).
ALSO_READ: dict[str, str] = {
    "TINYTITAN_MODEL": "tinytitan chat loads this model in-process when no local server answers "
    "(tinytitan launch: the server it starts serves it).",
    "TINYTITAN_PORT": "tinytitan chat and tinytitan launch look for the local server on this port.",
}
OTHER_ENVIRONMENT: dict[str, str] = {
    "HF_HUB_OFFLINE": "1: use only the Hugging Face cache (a model that is not cached is a clear error).",
    "HF_HOME, HF_HUB_CACHE": "Where the Hugging Face cache lives (default ~/.cache/huggingface/hub); "
    "HF_HUB_CACHE is also tinytitan models --cache-dir.",
    "OLLAMA_MODELS": "Ollama's model store, listed by tinytitan models (default ~/.ollama/models).",
    "XDG_DATA_HOME, XDG_CACHE_HOME": "Base directories for the chat history, the memory journals and the caches.",
}
FILES: list[tuple[str, str]] = [
    ("~/.cache/tinytitan/", "Converted GGUF models (gguf/<digest>/, keyed by the file's sha256) and the test model."),
    ("~/.cache/huggingface/hub/", "Hugging Face models: serve --model ORG/NAME downloads there once."),
    (
        "~/.ollama/models/, ~/.lmstudio/models/",
        "GGUF files Ollama and LM Studio downloaded, listed by tinytitan models.",
    ),
    ("~/.local/share/tinytitan/chat_history", "The history of tinytitan chat's prompt."),
    (
        "~/.local/share/tinytitan/memory/",
        "Agent memory journals, one per workspace (serve --memory; --memory-dir changes it; "
        "~/Library/Application Support/tinytitan/memory on macOS).",
    ),
    (
        "~/.codex/tinytitan-models.json, ~/.pi/agent/models.json",
        "What tinytitan launch writes for Codex (its model catalog entry, beside config.toml, which is never "
        "edited) and pi (the tinytitan provider; the file's other entries are kept). $CODEX_HOME and "
        "$PI_CODING_AGENT_DIR move them.",
    ),
    ("--prompt-cache-dir DIR", "The prompt cache's disk tier: KV snapshots kept across restarts."),
]
EXIT_STATUS: list[tuple[str, str]] = [
    (
        "0",
        "Success. serve: stopped by Ctrl-C (once), after a clean shutdown — also while the weights load. "
        "tinytitan launch exits with the agent's own status.",
    ),
    ("1", "A chat in pipe mode had a failed message; models rm was declined; an unexpected error."),
    (
        "2",
        "A usage or setup error, in one line on stderr: a bad flag or variable (an unknown option, a missing "
        "or bad value, an extra argument — the line names the command's --help; a --port outside 1-65535, an "
        "unknown TINYTITAN_BLAS, a BLIS_ARCH_TYPE the preloaded BLIS has no kernels for), a port in use, "
        "a model that cannot be loaded (missing or truncated weights, "
        "refused at start-up; or its first load failed), a server that is down (chat), an unknown command "
        "(the line says what to type instead), an empty chat prompt, a --models-dir that does not exist.",
    ),
    ("3", "serve: the web app failed to start after the port was bound (the log says why)."),
    ("75", "serve under mlx.launch: the group lost a rank; every rank exits with it so the launcher can restart."),
    (
        "130",
        "Interrupted: Ctrl-C in chat (also while it starts) or before serve started; serve: a second Ctrl-C "
        "while it shuts down "
        "(stopped at once, open requests cut, one line).",
    ),
    (
        "143",
        "serve: stopped by SIGTERM. It shuts down cleanly (open streams end with an error event), then ends by "
        "the signal, as uvicorn does and as service managers expect of a clean stop (a shell shows 143).",
    ),
]


def _app() -> Any:
    import typer.main

    from tinytitan.cli.app import app

    return typer.main.get_command(app)


def _roff(text: str) -> str:
    """Escape text for roff: backslashes, hyphens, and lines that would start with a request."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + line) if line.startswith((".", "'")) else line for line in text.splitlines())


def _is_argument(param: Any) -> bool:
    return type(param).__name__.endswith("Argument")


def _param_lines(param: Any) -> list[str]:
    if getattr(param, "hidden", False):
        return []
    metavar = param.metavar or ""
    if _is_argument(param):
        head = f"\\fI{_roff(metavar or param.name.upper())}\\fR"
    else:
        names = [*param.opts, *getattr(param, "secondary_opts", [])]
        head = ", ".join(f"\\fB{_roff(opt)}\\fR" for opt in names)
        if metavar and not getattr(param, "is_flag", False):
            head += f" \\fI{_roff(metavar)}\\fR"
    notes = []
    envvar = getattr(param, "envvar", None)
    if envvar:
        notes.append(f"env {envvar}")
    default = param.default
    if default not in (None, False, (), []) and not callable(default) and not getattr(param, "is_flag", False):
        notes.append(f"default {default}")
    text = (getattr(param, "help", None) or "").strip()
    if notes:
        text = f"{text} [{'; '.join(notes)}]".strip()
    return [".TP", head, _roff(text) if text else ""]


def _synopsis(path: tuple[str, ...], command: Any) -> str:
    from tinytitan.cli.polish import usage_name

    words = " ".join(f"\\fB{_roff(word)}\\fR" for word in (PROG, *path))
    args = [_roff_usage(usage_name(p)) for p in command.params if _is_argument(p)]
    more = ""
    if getattr(command, "commands", None):  # `models` alone lists: its COMMAND is optional
        more = " [\\fICOMMAND\\fR]" if getattr(command, "invoke_without_command", False) else " \\fICOMMAND\\fR"
    return " ".join([words, "[\\fIOPTIONS\\fR]", *args]) + more


def _roff_usage(name: str) -> str:
    """``[PROMPT]...`` with the name in italics and the brackets and dots plain."""
    core = name.strip("[].")
    return name.replace(core, f"\\fI{_roff(core)}\\fR", 1)


def man_page() -> str:
    from tinytitan import __version__
    from tinytitan.cli.examples import EXAMPLES
    from tinytitan.cli.polish import walk

    root = _app()
    commands = [(path, command) for path, command in walk(root) if path]
    out = [
        f'.TH TINYTITAN 1 "" "tinytitan {__version__}" "User Commands"',
        ".nh",  # no hyphenation: option and variable names stay whole (and searchable)
        ".ad l",
        ".SH NAME",
        "tinytitan \\- a local LLM server and CLI for coding agents",
        ".SH SYNOPSIS",
        f"\\fB{PROG}\\fR [\\fB\\-\\-version\\fR | \\fB\\-\\-help\\fR]",
        ".br",
        *[line for path, command in commands for line in (_synopsis(path, command), ".br")],
        ".SH DESCRIPTION",
        _roff((root.help or "").strip()),
        ".PP",
        "Every option with an environment variable (see \\fBENVIRONMENT\\fR) reads it when the option is "
        "not given; \\fBtinytitan\\fR \\fICOMMAND\\fR \\fB\\-\\-help\\fR shows the same text as this page.",
        ".SH OPTIONS",
    ]
    for param in root.params:
        out += _param_lines(param)
    out.append(".SH COMMANDS")
    for path, command in commands:
        out += [f".SS {PROG} {' '.join(path)}", _synopsis(path, command), ".PP", _roff((command.help or "").strip())]
        more = (command.epilog or "").replace(EXAMPLES.get(path, ""), "").strip()  # text beside the examples
        if more:
            out += [".PP", _roff(more)]
        for param in command.params:
            out += _param_lines(param)
    out.append(".SH EXAMPLES")
    for path, _command in walk(root):
        lines = EXAMPLES.get(path, "").splitlines()[1:]
        if lines:
            out += [".PP", f"\\fB{' '.join((PROG, *path))}\\fR", ".RS 4", ".nf"]
            out += [_roff(line.strip()) for line in lines]
            out += [".fi", ".RE"]
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
    out += [
        ".SH SEE ALSO",
        "\\fBtinytitan\\fR \\fICOMMAND\\fR \\fB\\-\\-help\\fR; \\fBtinytitan completion\\fR for shell completion; "
        "the project's README for installing per platform and connecting each client.",
    ]
    return "\n".join(out) + "\n"


def environment() -> dict[str, str]:
    """Every TINYTITAN_* variable: an option's (its help, and which commands read it) or an extra."""
    from tinytitan.cli.polish import walk

    found: dict[str, tuple[str, list[str]]] = {}
    for path, command in walk(_app()):
        for param in command.params:
            envvar = getattr(param, "envvar", None)
            for name in [envvar] if isinstance(envvar, str) else envvar or []:
                if not name.startswith("TINYTITAN_"):
                    continue  # HF_HUB_CACHE and the like: OTHER_ENVIRONMENT
                help_text = (getattr(param, "help", None) or "").strip()
                flag = param.opts[0] if param.opts else param.name
                entry = found.setdefault(name, (f"{flag}: {help_text}", []))
                entry[1].append(" ".join(path))
    described = {name: f"{text} ({', '.join(sorted(set(cmds)))})" for name, (text, cmds) in found.items()}
    for name, text in ALSO_READ.items():
        described[name] = f"{described[name]} {text}"
    return {**described, **EXTRA_ENVIRONMENT}


def undocumented_variables() -> list[str]:
    """TINYTITAN_* names used in the package's source that the man page would not describe."""
    used: set[str] = set()
    for path in (ROOT / "tinytitan").rglob("*.py"):
        used |= set(_ENV_NAME.findall(path.read_text(encoding="utf-8")))
    return sorted(used - set(environment()))


def completion(shell: str) -> str:
    from tinytitan.cli.completion import script

    return script(shell, _app())


def generated() -> dict[Path, str]:
    files = {ROOT / "man" / "tinytitan.1": man_page()}
    for shell, name in COMPLETIONS.items():
        files[ROOT / "completions" / name] = completion(shell)
    return files


def stale_files() -> list[Path]:
    """The generated files whose committed text differs from what the app generates now."""
    return [path for path, text in generated().items() if not path.exists() or path.read_text() != text]


def main(argv: list[str]) -> int:
    missing = undocumented_variables()
    if missing:
        print(f"undocumented environment variables: {', '.join(missing)} (describe them in tools/manual.py)")
        return 1
    if "--check" in argv:
        stale = stale_files()
        for path in stale:
            print(f"stale: {path.relative_to(ROOT)} (run: python tools/manual.py)")
        return 1 if stale else 0
    for path, text in generated().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
