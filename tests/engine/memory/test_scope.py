"""Which workspace a request's memory belongs to."""

from __future__ import annotations

import pytest

from tinytitan.engine.memory.scope import Scope, declared_cwd, resolve_scope, workspace_id

HOME = "/users/ada"


def _scope(
    *,
    header: str | None = None,
    system: str | None = None,
    first_user: str | None = None,
    launch_dir: str = "/srv/launch",
) -> Scope | None:
    return resolve_scope(
        header=header, system=system, first_user=first_user, launch_dir=launch_dir, user="ada", home=HOME
    )


def test_the_header_wins_over_the_prompt_and_the_launch_directory() -> None:
    scope = _scope(header="/projects/app", system="Working directory: /projects/other")
    assert scope is not None
    assert (scope.workspace, scope.origin) == ("/projects/app", "header")
    assert scope.key == f"tinytitan/ada/{workspace_id('/projects/app')}"


def test_claude_code_working_directory_in_the_system_prompt() -> None:
    system = "You are Claude Code.\n<env>\nWorking directory: /projects/proj\nIs directory a git repo: Yes\n</env>"
    scope = _scope(system=system)
    assert scope is not None and (scope.workspace, scope.origin) == ("/projects/proj", "prompt")


def test_pi_current_working_directory() -> None:
    scope = _scope(system="You are pi.\nCurrent working directory: /projects/pi-proj\n")
    assert scope is not None and scope.workspace == "/projects/pi-proj"


def test_codex_cwd_in_its_environment_context_turn() -> None:
    first_user = (
        "<environment_context>\n  <cwd>/projects/codex-proj</cwd>\n  <shell>bash</shell>\n</environment_context>"
    )
    scope = _scope(first_user=first_user)
    assert scope is not None and scope.workspace == "/projects/codex-proj"
    assert declared_cwd(None, first_user) == "/projects/codex-proj"


def test_the_launch_directory_when_nothing_is_declared() -> None:
    scope = _scope()
    assert scope is not None and (scope.workspace, scope.origin) == ("/srv/launch", "launch")


def test_paths_are_normalized_so_one_directory_has_one_id() -> None:
    a, b = _scope(header="/projects/app/"), _scope(header="/projects//x/../app")
    assert a is not None and b is not None and a.key == b.key


@pytest.mark.parametrize("where", ["/", HOME, "/users", HOME + "/", "//"])
def test_home_its_parent_and_root_are_never_workspaces(where: str) -> None:
    assert _scope(header=where) is None
    assert _scope(system=f"Working directory: {where}") is None
    assert _scope(launch_dir=where) is None


def test_a_refused_declared_directory_turns_memory_off_instead_of_falling_back() -> None:
    # a client in ~ must not have its memories filed under the server's launch directory
    assert _scope(header=HOME, launch_dir="/srv/launch") is None


def test_a_relative_header_is_not_a_workspace() -> None:
    assert _scope(header="app") is None


def test_workspace_id_is_the_name_plus_eight_hex_of_the_full_path() -> None:
    one, two = workspace_id("/a/app"), workspace_id("/b/app")
    assert one.startswith("app-") and two.startswith("app-") and one != two
    assert len(one.split("-")[-1]) == 8
    assert workspace_id("/a/we ird*name").startswith("we_ird_name-")
