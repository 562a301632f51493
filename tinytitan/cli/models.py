"""``tinytitan models``: what can be served (a table or JSON), ``pull`` into the hub cache, ``rm``.

Thin over ``tinytitan.engine.models.catalog`` (scanning, facts: model directories, the Hugging Face cache,
GGUF files in Ollama's and LM Studio's stores, the embedded SmolLM2) and ``tinytitan.hub`` (pull,
remove).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from tinytitan.cli.common import fail
from tinytitan.cli.options import option

__all__ = ["models_app", "render"]

models_app = typer.Typer(
    name="models",
    help="List the models you can serve; pull one into the Hugging Face cache; remove one.",
    invoke_without_command=True,
    no_args_is_help=False,
)

_CACHE_DIR = typer.Option(
    None, "--cache-dir", envvar="HF_HUB_CACHE", metavar="DIR", help="The Hugging Face hub cache (default: HF's own)."
)


ModelsDir = Annotated[
    list[Path],
    option(
        "--models-dir",
        "List the model directories in DIR (or 'hf': the Hugging Face cache) instead of the usual places, as "
        "serve --models-dir would serve them (repeatable; several in the variable are separated by ':').",
        "DIR|hf",
    ),
]


def _fail(message: str) -> typer.Exit:
    return fail("models", message)


def _count(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            value = n / scale
            return f"{value:.1f}{unit}" if value < 10 else f"{value:.0f}{unit}"
    return str(n)


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    if n >= 2**30:
        return f"{n / 2**30:.1f}GiB"
    return f"{n / 2**20:.0f}MiB"


_SHORT_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}  # the table's narrow spelling


def _context(n: int | None) -> str:
    if not n:
        return "-"
    return f"{n // 1024}K" if n % 1024 == 0 else f"{n:,}"


def _where(row: dict[str, Any]) -> str:
    if row.get("origin") == "hf" and row.get("repo_id"):
        return f"hf:{row['repo_id']}"
    path = row.get("path")
    if not path:
        return "-"
    home = str(Path.home())
    return "~" + path[len(home) :] if path.startswith(home + "/") else path


def _table(rows: list[dict[str, Any]], *, where: bool) -> Any:
    from rich.table import Table

    table = Table(box=None, pad_edge=False, padding=(0, 1), collapse_padding=True, header_style="bold")
    table.add_column("ID", overflow="fold")  # folds rather than cut when nothing else gives
    table.add_column("ARCH", no_wrap=True)
    table.add_column("PARAMS", justify="right", no_wrap=True)
    table.add_column("QUANT", no_wrap=True)
    table.add_column("SIZE", justify="right", no_wrap=True)
    table.add_column("CTX", justify="right", no_wrap=True)
    table.add_column("REASONING")  # wraps between levels
    table.add_column("TOOLS", no_wrap=True)
    table.add_column("INPUT", no_wrap=True)  # text, or text+image for a vision model
    if where:
        table.add_column("WHERE", no_wrap=True)
    for row in rows:
        levels = row.get("reasoning_levels")
        cells = [
            row["id"] + (" *" if row.get("resident") else ""),
            row.get("architecture") or "-",
            _count(row.get("parameters")),
            _SHORT_DTYPES.get(row.get("quantization") or "-", row.get("quantization") or "-"),
            _size(row.get("size_bytes")),
            _context(row.get("context_window")),
            " ".join(levels) if levels else ("-" if levels is None else "none"),
            row.get("tool_call_family") or ("none" if row.get("tool_calls") is False else "-"),
            "+".join(row.get("input_modalities") or ["text"]),
        ]
        table.add_row(*cells, *([_where(row)] if where else []))
    return table


def render(rows: list[dict[str, Any]], console: Any) -> None:
    """The facts as one table; where a terminal is too narrow for the paths, they follow it, one a line."""
    full = _table(rows, where=True)
    natural = console.measure(full, options=console.options.update_width(10**6)).maximum
    if natural <= console.width:
        console.print(full)
        return
    console.print(_table(rows, where=False))
    for row in rows:
        console.print(f"{row['id']}  {_where(row)}", style="dim", markup=False, highlight=False)


PIPE_WIDTH_MAX = 1000  # piped output: lines as long as they are


def _console() -> Any:
    """Rich's console, as wide as the terminal; piped, wide enough that no path or line is cut (rich
    would wrap at 80 columns) unless COLUMNS says otherwise."""
    import os
    import sys

    from rich.console import Console

    if sys.stdout.isatty() or os.environ.get("COLUMNS"):
        return Console()
    return Console(width=PIPE_WIDTH_MAX)


def _server_rows(url: str, api_key: str | None) -> list[dict[str, Any]]:
    """A server's models with their facts (``GET /v1/models?details=true``); ``ChatError``: one line."""
    from tinytitan.chat.client import ChatClient

    client = ChatClient(url, api_key)
    try:
        return [{**(m.get("tinytitan") or {}), "id": m["id"]} for m in client.model_list(details=True)]
    finally:
        client.close()


@models_app.callback()
def models(
    ctx: typer.Context,
    models_dir: ModelsDir = [],  # noqa: B006 - Typer reads the default, never mutates it
    url: str = typer.Option(
        None, "--url", metavar="URL", help="List what a running server serves instead (e.g. http://127.0.0.1:8096)."
    ),
    api_key: Annotated[
        str | None, option("--api-key", "With --url: the server's API key (sent as a Bearer token).", "KEY")
    ] = None,
    cache_dir: Path = _CACHE_DIR,
    as_json: bool = typer.Option(False, "--json", help="Print JSON: {models: [...], skipped: [...]}."),
) -> None:
    """List the models you can serve, with their facts (read without loading weights).

    Without --models-dir or --url: the Hugging Face cache, and the GGUF files of Ollama, LM Studio
    and the embedded model (the ids `serve --model` takes).
    """
    if ctx.invoked_subcommand is not None:
        return
    skipped: list[dict[str, str]] = []
    if url:
        from tinytitan.chat.client import ChatError

        try:
            rows = _server_rows(url, api_key)
        except ChatError as exc:  # not reachable, a key missing, not a server root: one line that says what to do
            raise _fail(str(exc)) from None
        where = url
    else:
        from tinytitan.engine.models.catalog import GgufStoreSource, HubCacheSource, Source, scan, source_for

        specs = [str(d) for d in models_dir]
        for spec in specs:
            if spec != "hf" and not Path(spec).expanduser().exists():
                raise _fail(f"no directory {spec}; --models-dir takes a directory of model directories, or hf")
        sources: list[Source] = [HubCacheSource(cache_dir) if s == "hf" else source_for(s) for s in specs]
        where = " and ".join("the Hugging Face cache" if s == "hf" else s for s in specs)
        if not specs:  # what `serve --model` finds on this machine
            sources = [HubCacheSource(cache_dir), GgufStoreSource()]
            where = "the Hugging Face cache, Ollama or LM Studio"
        catalog = scan(sources, quiet=True)  # the skipped ones are listed below
        rows = [e.as_json() for e in catalog.entries]
        skipped = [{"path": str(s.path), "reason": s.reason} for s in catalog.skipped]
    default = not url and not models_dir  # what `serve --model` finds: the GGUF models' converted copies too
    copies = _converted(rows) if default else []
    if as_json:
        listing = {"models": rows, "skipped": skipped}
        typer.echo(json.dumps({**listing, "converted": copies} if default else listing, indent=2))
        return
    console = _console()
    if rows:
        render(rows, console)
    else:
        console.print(
            f"no models found in {where}; `tinytitan models pull ORG/NAME` downloads one into the "
            "Hugging Face cache, or point --models-dir at a directory of model directories"
        )
    for skip in skipped:
        name = Path(skip["path"]).name
        console.print(f"skipped {name}: {skip['reason']} ({skip['path']})", style="dim", markup=False, highlight=False)
    if copies:
        total = _size(sum(int(c["size_bytes"]) for c in copies))
        console.print(f"converted GGUF copies ({total}; `tinytitan models rm ID` removes one):", style="dim")
        for copy in copies:
            line = f"  {copy['id']}  {_size(int(copy['size_bytes']))}  {_where(copy)}"
            console.print(line, style="dim", markup=False, highlight=False, soft_wrap=True)


@models_app.command("pull")
def pull(
    repo_id: str = typer.Argument(..., metavar="ORG/NAME", help="A Hugging Face hub id."),
    cache_dir: Path = _CACHE_DIR,
) -> None:
    """Download a model into the Hugging Face cache (resumes a partial download)."""
    from tinytitan.engine.models.files import ModelUnavailable
    from tinytitan.hub import pull as hub_pull

    try:
        path, online = hub_pull(repo_id, cache_dir)
    except ModelUnavailable as exc:
        raise _fail(exc.message) from None
    note = "" if online else " (offline: the cached copy, not checked for updates)"
    typer.echo(f"{repo_id} is in the Hugging Face cache at {path}{note}")
    typer.echo(f"serve it: tinytitan serve --model {repo_id}   (or --models-dir hf)")


def _converted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cache's converted GGUF copies, each named by the id of the GGUF model it came from (else its own name)."""
    from tinytitan.engine.models.gguf.cache import converted_copies

    ids = {row.get("path"): row["id"] for row in rows if row.get("format") == "gguf"}
    return [{"id": ids.get(c.gguf) or c.name, **c.as_json()} for c in converted_copies()]


def _copy_names(copy: dict[str, Any]) -> set[str]:
    """The names ``models rm`` knows a converted copy by: the id ``tinytitan models`` lists
    (``embedded:SmolLM2-135M-Instruct``), the id it is served as (``SmolLM2-135M-Instruct``; a GGUF
    file's stem for ``--model FILE.gguf``), and the copy's directory name."""
    names = {copy["id"], copy["name"]}
    if ":" in copy["id"]:  # a store's id: served without the store's prefix
        names.add(copy["id"].split(":", 1)[1])
    if copy.get("gguf"):
        names.add(Path(copy["gguf"]).name.removesuffix(".gguf"))
    return names


def _gguf_rows() -> list[dict[str, Any]]:
    from tinytitan.engine.models.catalog import GgufStoreSource, scan

    return [e.as_json() for e in scan([GgufStoreSource()], quiet=True).entries]


def _confirm(question: str) -> None:
    """Ask at a terminal; a pipe's first line answers (`echo y | …`), printing nothing first; no
    answer at all points at --yes."""
    import sys

    refusal = "no answer to confirm with (stdin is not a terminal); pass --yes to remove without asking"
    if sys.stdin.isatty():
        try:
            answer = typer.confirm(question)
        except typer.Abort:  # Ctrl-D at the question
            typer.echo("")
            raise _fail(refusal) from None
    else:
        line = sys.stdin.readline()
        if not line.strip():
            raise _fail(refusal)
        answer = line.strip().lower() in ("y", "yes")
    if not answer:
        typer.echo("nothing removed")
        raise typer.Exit(1)


@models_app.command("rm")
def rm(
    name: str = typer.Argument(
        ...,
        metavar="ID",
        help="A cached model (ORG/NAME, or the id it is served as), or a GGUF model whose converted copy to remove.",
    ),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    cache_dir: Path = _CACHE_DIR,
) -> None:
    """Remove a model from the Hugging Face cache, or a GGUF model's converted copy, after confirmation.

    A GGUF file itself (Ollama's, LM Studio's, the embedded one) stays: only TinyTitan's converted
    copy goes, and the next load converts the file again.
    """
    from tinytitan.engine.models.files import ModelUnavailable
    from tinytitan.hub import find_cached, remove

    try:
        repo = find_cached(name, cache_dir)
    except ModelUnavailable as exc:
        copies = [c for c in _converted(_gguf_rows()) if name in _copy_names(c)]
        if not copies:
            raise _fail(f"{exc.message}; nor is it a converted GGUF copy (`tinytitan models` lists those)") from None
        _remove_copies(name, copies, yes)
        return
    if not yes:
        _confirm(f"remove {repo.repo_id} ({_size(repo.size_bytes)}) from {repo.path.parent}?")
    freed = remove(repo, cache_dir)
    typer.echo(f"removed {repo.repo_id} ({_size(freed)} freed)")


def _remove_copies(name: str, copies: list[dict[str, Any]], yes: bool) -> None:
    from tinytitan.engine.models.gguf.cache import ConvertedCopy, remove_copy

    size = _size(sum(int(c["size_bytes"]) for c in copies))
    if not yes:
        _confirm(f"remove the converted copy of {name} ({size}) from {Path(copies[0]['path']).parent}?")
    freed = sum(remove_copy(ConvertedCopy(Path(c["path"]), c["gguf"] or "", int(c["size_bytes"]))) for c in copies)
    typer.echo(f"removed the converted copy of {name} ({_size(freed)} freed; the GGUF file stays)")
