"""Examples for each command's ``--help`` epilog and the man page's EXAMPLES, keyed by the command's words.

Every command must have an entry (tests/cli/test_help.py). Each example is a command line and, after
two spaces and ``#``, what it does; the man page and ``--help`` show them as written. Keep them
runnable: tests/cli/test_help.py parses each line with the real app.
"""

from __future__ import annotations

__all__ = ["EXAMPLES", "example_lines"]


def _block(*lines: str) -> str:
    """Lines of ``command  # what it does``, the comments lined up."""
    pairs = [(line.split("  # ")[0], line.split("  # ")[1] if "  # " in line else "") for line in lines]
    width = max(len(command) for command, comment in pairs if comment) if any(c for _, c in pairs) else 0
    shown = [f"{command:<{width}}  # {comment}" if comment else command for command, comment in pairs]
    return "Examples:\n" + "\n".join(f"  {line}" for line in shown)


EXAMPLES: dict[tuple[str, ...], str] = {
    (): _block(
        "tinytitan serve  # serve the default model on http://127.0.0.1:8096/v1",
        "tinytitan chat  # talk to it in the terminal",
        "tinytitan serve --help  # every option of a command",
    ),
    ("serve",): _block(
        "tinytitan serve  # the default model (downloaded once, then offline)",
        "tinytitan serve --model mlx-community/Qwen3-0.6B-4bit --port 8097",
        "tinytitan serve --model ~/models/Qwen3-0.6B-Q8_0.gguf --max-context 16384",
        "tinytitan serve --models-dir ~/models --models-dir hf  # a catalog, switched between requests",
        "tinytitan serve --model BIG --draft-model SMALL  # SMALL (same tokenizer) drafts for BIG",
        "tinytitan serve --stub script.json  # a scripted backend: wire a client without a model",
        "tinytitan serve --memory  # agent memory, one journal per workspace",
        "TINYTITAN_API_KEY=secret tinytitan serve --host 0.0.0.0  # reachable from the network",
    ),
    ("models",): _block(
        "tinytitan models  # cached hub models and Ollama / LM Studio GGUF files",
        "tinytitan models --models-dir ~/models --json",
        "tinytitan models --url http://127.0.0.1:8096  # what a running server serves",
    ),
    ("models", "pull"): _block(
        "tinytitan models pull mlx-community/Qwen3-0.6B-4bit  # into the Hugging Face cache",
    ),
    ("models", "rm"): _block(
        "tinytitan models rm mlx-community/Qwen3-0.6B-4bit --yes",
    ),
    ("count-tokens",): _block(
        "tinytitan count-tokens request.json --model mlx-community/Qwen3-0.6B-4bit",
        "tinytitan count-tokens - --json < request.json  # the request on stdin",
    ),
    ("compact",): _block(
        "tinytitan compact session.json --model mlx-community/Qwen3-0.6B-4bit",
        "tinytitan compact session.json --max-tokens 1024 --json",
    ),
    ("chat",): _block(
        'tinytitan chat "What is 2+2?"  # one answer, then exit',
        'git diff | tinytitan chat "Review this diff"  # piped stdin follows the prompt',
        "tinytitan chat  # the local server if it answers, else the model in-process",
        "tinytitan chat --url http://127.0.0.1:8096 --reasoning low",
        'echo "hi" | tinytitan chat --stub script.json  # pipe mode: answers only',
    ),
    ("launch",): _block(
        "tinytitan launch claude  # Claude Code on the local server (started here if none answers)",
        "tinytitan launch codex -- exec 'fix the failing test'  # arguments after -- go to the agent",
        "tinytitan launch pi --model ~/models/Qwen3-0.6B-Q8_0.gguf  # a server for this model, stopped after",
        "tinytitan launch opencode --url http://127.0.0.1:8097  # a server elsewhere",
    ),
    ("completion",): _block(
        "tinytitan completion bash > ~/.local/share/bash-completion/completions/tinytitan",
        "tinytitan completion zsh > ~/.zfunc/_tinytitan  # with fpath+=~/.zfunc before compinit",
        "tinytitan completion fish > ~/.config/fish/completions/tinytitan.fish",
    ),
}


def example_lines(path: tuple[str, ...]) -> list[str]:
    """The command lines of ``path``'s examples, without their comments."""
    lines = EXAMPLES.get(path, "").splitlines()[1:]
    return [line.strip().split("  #")[0] for line in lines]
