from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from machine_git.agents import install
from machine_git.core.errors import InstallError
from machine_git.sessions import pi

ARGV = json.dumps([sys.executable, "-m", "machine_git"])


def agent_dir() -> Path:
    return pi.agent_dir()


def models() -> dict[str, object]:
    value = json.loads((agent_dir() / "models.json").read_text())
    assert isinstance(value, dict)
    return value


def test_the_extension_calls_this_machine_with_the_live_session() -> None:
    text = install.render_pi_extension("global")
    assert text.startswith("// machine-generated: pi extension.")
    assert f"const MACHINE: string[] = {ARGV};" in text
    assert 'const SCOPE: string = "global";' in text
    assert "@@" not in text
    # the session file and the leaf of the live session, as argv (no shell)
    assert '["--session", file, "--entry", leaf]' in text
    assert "spawn(MACHINE[0], [...MACHINE.slice(1), ...args]" in text
    assert "shell: true" not in text
    for name in ("good", "bad", "tagged", "machine", "train", "tinker"):
        assert text.count(f'pi.registerCommand("{name}"') == 1
    assert 'runMachine(["observe", "--if-auto", ...at], ctx.cwd)' in text
    assert 'pi.on("agent_end"' in text and 'pi.on("session_before_compact"' in text


def test_a_project_extension_says_how_to_remove_it() -> None:
    text = install.render_pi_extension("project")
    assert text.splitlines()[0] == (
        "// machine-generated: pi extension. "
        "`machine uninstall pi --project` removes this file."
    )
    assert 'const SCOPE: string = "project";' in text


def test_the_letta_mod_passes_the_history_as_a_file() -> None:
    text = install.render_letta_mod()
    assert text.startswith("// machine-generated: letta mod.")
    assert f"const MACHINE: string[] = {ARGV};" in text
    for name in ("good", "bad", "tagged", "machine", "train"):
        assert text.count(f'register("{name}", ') == 1
    assert text.count("letta.commands.register(") == 1  # in the one helper
    assert "conversation.getHistory({ limit: HISTORY_LIMIT, order: " in text
    assert '[sub, "--host", "letta", "--session", file, ...args]' in text
    assert "writeFileSync(file, JSON.stringify(history), { mode: 0o600 })" in text
    assert "rmSync(dir, { recursive: true, force: true })" in text
    assert "shell: true" not in text
    assert 'const TINKER: string = "tinker";' in text
    assert "@@" not in text


def test_the_letta_provider_lists_its_models_and_never_sends_a_name() -> None:
    text = install.render_letta_provider()
    assert text.startswith("// machine-generated: letta tinker provider.")
    assert f"const BASE_URL: string = {json.dumps(install.TINKER_OAI_URL)};" in text
    offered = json.dumps(str(install.letta_offered_path()))
    assert f"const OFFERED_FILE: string = {offered};" in text
    assert f"const CATALOG: string[] = {json.dumps(list(install.CATALOG))};" in text
    # no static models (ids with "/" are refused there): listModels, and the
    # variable's name only when it is set
    assert "\tmodels:" not in text and "\t\tlistModels,\n" in text
    assert 'if ((process.env[KEY_ENV] ?? "").trim()) config.apiKey = KEY_ENV;' in text
    assert "@@" not in text


def test_a_missing_placeholder_value_is_an_error() -> None:
    with pytest.raises(InstallError, match="placeholder @@B@@ has no value"):
        install.render("@@A@@ @@B@@", {"A": "x"})


def test_install_pi_writes_one_private_file_and_twice_changes_nothing() -> None:
    first = install.install_pi()
    target = agent_dir() / "extensions" / "machine.ts"
    assert [(o.path, o.action) for o in first] == [
        (target, "installed"),
        (agent_dir() / "models.json", "installed"),
    ]
    assert target.read_text() == install.render_pi_extension("global")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    before = target.read_bytes()
    again = install.install_pi()
    assert [o.action for o in again] == ["unchanged", "unchanged"]
    assert target.read_bytes() == before
    assert sorted(p.name for p in target.parent.iterdir()) == ["machine.ts"]


def test_install_pi_in_a_project(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    done = install.install_pi(project)
    target = project / ".pi" / "extensions" / "machine.ts"
    assert done[0].path == target and done[0].action == "installed"
    assert 'const SCOPE: string = "project";' in target.read_text()
    assert not (agent_dir() / "extensions").exists()


def test_a_file_machine_did_not_write_is_left_alone() -> None:
    target = agent_dir() / "extensions" / "machine.ts"
    target.parent.mkdir(parents=True)
    target.write_text("export default function () {}\n")
    with pytest.raises(InstallError, match="was not written by machine"):
        install.install_pi()
    with pytest.raises(InstallError, match="was not written by machine; left in place"):
        install.uninstall_pi()
    assert target.read_text() == "export default function () {}\n"


def test_the_tinker_provider_joins_other_providers() -> None:
    path = agent_dir() / "models.json"
    path.parent.mkdir(parents=True)
    ollama = {"baseUrl": "http://localhost:11434/v1", "models": [{"id": "llama"}]}
    path.write_text(json.dumps({"providers": {"ollama": ollama}}))
    install.install_pi()
    providers = models()["providers"]
    assert isinstance(providers, dict)
    assert providers["ollama"] == ollama
    tinker = providers["tinker"]
    assert {k: v for k, v in tinker.items() if k != "models"} == {
        "name": "Tinker (machine)",
        "baseUrl": install.TINKER_OAI_URL,
        "api": "openai-completions",
        "apiKey": "!printenv TINKER_API_KEY",
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
    }
    assert [m["id"] for m in tinker["models"]] == list(install.CATALOG)
    assert tinker["models"][0] == {
        "id": "thinkingmachines/Inkling-Small:peft:262144",
        "name": "Inkling-Small (Tinker)",
        "reasoning": False,
        "input": ["text"],
        "contextWindow": 262144,
        "maxTokens": 8192,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
    }


def test_a_broken_models_file_stops_the_install_before_anything_is_written() -> None:
    path = agent_dir() / "models.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(InstallError, match="is not valid JSON; fix it or move it"):
        install.install_pi()
    assert not (agent_dir() / "extensions").exists()
    assert path.read_text() == "{not json"


def test_someone_elses_tinker_provider_is_kept() -> None:
    path = agent_dir() / "models.json"
    path.parent.mkdir(parents=True)
    theirs = {"providers": {"tinker": {"baseUrl": "https://example.test/v1"}}}
    path.write_text(json.dumps(theirs))
    done = install.install_pi()
    assert (done[1].action, done[1].detail) == (
        "skipped",
        "a 'tinker' provider is already configured",
    )
    assert models() == theirs
    assert install.add_pi_model("Qwen/Qwen3-8B").action == "skipped"
    assert install.uninstall_pi()[1].action == "absent"
    assert models() == theirs


def test_a_student_is_offered_once_in_pi() -> None:
    assert install.add_pi_model("Qwen/Qwen3-8B").action == "skipped"
    install.install_pi()
    handle = "tinker://run-1:train:0/sampler_weights/000080"
    assert install.add_pi_model(handle).action == "updated"
    assert install.add_pi_model(handle).action == "unchanged"
    entries = models()["providers"]["tinker"]["models"]  # type: ignore[index]
    assert [m["id"] for m in entries] == [*install.CATALOG, handle]
    assert entries[-1]["name"] == "checkpoint 000080 (Tinker)"
    assert entries[-1]["contextWindow"] == 32768


def test_uninstall_keeps_the_provider_while_the_global_extension_stays(
    tmp_path: Path,
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    install.install_pi()
    install.install_pi(project)
    (project / ".pi" / "settings.json").write_text("{}")  # the user's own
    removed = install.uninstall_pi(project)
    assert [o.action for o in removed] == ["removed"]
    # machine's folder goes with its file; the user's .pi stays
    assert sorted(p.name for p in (project / ".pi").iterdir()) == ["settings.json"]
    assert "tinker" in models()["providers"]  # type: ignore[operator]
    removed = install.uninstall_pi()
    assert [(o.path.name, o.action) for o in removed] == [
        ("machine.ts", "removed"),
        ("models.json", "removed"),
    ]
    # models.json held only machine's provider: no empty file is left
    assert not (agent_dir() / "models.json").exists()
    assert [o.action for o in install.uninstall_pi()] == ["absent", "absent"]


def test_uninstall_in_a_project_leaves_no_empty_folders(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    install.install_pi(project)
    install.uninstall_pi(project)
    assert list(project.iterdir()) == []


def test_uninstall_keeps_the_user_s_other_providers() -> None:
    path = agent_dir() / "models.json"
    path.parent.mkdir(parents=True)
    ollama = {"baseUrl": "http://localhost:11434/v1", "models": [{"id": "llama"}]}
    path.write_text(json.dumps({"providers": {"ollama": ollama}}))
    install.install_pi()
    install.uninstall_pi()
    assert models() == {"providers": {"ollama": ollama}}


def test_letta_install_and_uninstall() -> None:
    target = Path.home() / ".letta" / "mods" / "machine.ts"
    provider = Path.home() / ".letta" / "mods" / "machine-tinker.ts"
    offered = Path.home() / ".letta" / "machine" / "tinker-models.json"
    skills = Path.home() / ".letta" / "skills"
    names = list(install.skills())
    assert [(o.path, o.action) for o in install.install_letta()] == [
        (target, "installed"),
        (provider, "installed"),
        *[(skills / name / "SKILL.md", "installed") for name in names],
    ]
    assert target.read_text() == install.render_letta_mod()
    assert provider.read_text() == install.render_letta_provider()
    assert stat.S_IMODE(provider.stat().st_mode) == 0o600
    for name, text in install.skills().items():
        copied = skills / name / "SKILL.md"
        assert copied.read_text() == install.marked_skill(text)
        assert stat.S_IMODE(copied.stat().st_mode) == 0o600
        assert stat.S_IMODE(copied.parent.stat().st_mode) == 0o700
    assert {o.action for o in install.install_letta()} == {"unchanged"}
    # a student offered in Letta Code's catalog: once, in a private file
    assert install.add_letta_model("tinker://r/sampler_weights/1").action == "installed"
    assert install.add_letta_model("tinker://r/sampler_weights/2").action == "updated"
    assert install.add_letta_model("tinker://r/sampler_weights/1").action == "unchanged"
    assert json.loads(offered.read_text()) == [
        "tinker://r/sampler_weights/1",
        "tinker://r/sampler_weights/2",
    ]
    assert stat.S_IMODE(offered.stat().st_mode) == 0o600
    removed = install.uninstall_letta()
    assert [(o.path, o.action) for o in removed] == [
        (target, "removed"),
        (provider, "removed"),
        (offered, "removed"),
        *[(skills / name / "SKILL.md", "removed") for name in names],
    ]
    assert not target.exists() and not provider.exists()
    assert not offered.parent.exists()  # machine's folder held nothing else
    assert list(skills.iterdir()) == []  # the skill folders went too


def test_a_student_is_offered_in_letta_only_with_the_provider() -> None:
    done = install.add_letta_model("tinker://r/sampler_weights/1")
    assert (done.action, done.detail) == (
        "skipped",
        "machine install letta adds the Tinker provider",
    )
    assert not install.letta_offered_path().exists()


def test_a_tinker_mod_of_the_user_s_stops_the_letta_install() -> None:
    provider = install.letta_provider_path()
    provider.parent.mkdir(parents=True)
    provider.write_text("export default function activate() {}\n")
    with pytest.raises(InstallError, match="exists and was not written by machine"):
        install.install_letta()
    assert not install.letta_mod_path().exists()  # nothing written
    with pytest.raises(InstallError, match="was not written by machine; left in place"):
        install.uninstall_letta()
    assert provider.read_text() == "export default function activate() {}\n"


def test_a_skill_copy_keeps_its_front_matter_first() -> None:
    text = "---\nname: x\ndescription: y\n---\n\n# X\n"
    assert install.marked_skill(text) == (
        f"---\nname: x\ndescription: y\n---\n{install.SKILL_MARKER}\n\n# X\n"
    )
    with pytest.raises(InstallError, match="has no front matter"):
        install.marked_skill("# X\n")
    with pytest.raises(InstallError, match="front matter is not closed"):
        install.marked_skill("---\nname: x\n")


def test_letta_skills_of_the_user_and_old_ones_of_machine() -> None:
    skills = Path.home() / ".letta" / "skills"
    mine = skills / "my-skill" / "SKILL.md"
    mine.parent.mkdir(parents=True)
    mine.write_text("---\nname: my-skill\ndescription: mine\n---\n")
    # a skill an older machine copied and this one no longer ships
    old = skills / "machine-old" / "SKILL.md"
    old.parent.mkdir()
    old.write_text(install.marked_skill("---\nname: machine-old\n---\n"))
    done = install.install_letta()
    assert (done[-1].path, done[-1].action) == (old, "removed")
    assert not old.parent.exists()
    assert sorted(p.name for p in skills.iterdir()) == sorted(
        [*install.skills(), "my-skill"]
    )
    install.uninstall_letta()
    assert [p.name for p in skills.iterdir()] == ["my-skill"]
    assert mine.read_text() == "---\nname: my-skill\ndescription: mine\n---\n"
    # a user's file where machine would copy one is never overwritten
    taken = skills / "machine-tagging" / "SKILL.md"
    taken.parent.mkdir()
    taken.write_text("---\nname: machine-tagging\ndescription: mine\n---\n")
    with pytest.raises(InstallError, match="exists and was not written by machine"):
        install.install_letta()
    assert [o.action for o in install.uninstall_letta()] == ["absent", "absent"]


def test_the_extension_offers_the_skills_of_this_machine() -> None:
    text = install.render_pi_extension("global")
    folder = install.skills_dir()
    assert f"const SKILLS_DIR: string = {json.dumps(str(folder))};" in text
    assert 'pi.on("resources_discover"' in text
    assert sorted(install.skills()) == sorted(
        p.parent.name for p in folder.glob("*/SKILL.md")
    )
    # the footer reads what machine writes: the branch and the counts cache
    assert 'const BRANCH: string = "refs/heads/main";' in text
    assert 'const STATS_FILE: string = "machine/stats.json";' in text
    assert (
        'const KINDS: string[] = ["train", "traces", "rejected", "observed"];' in text
    )
    assert 'pi.registerCommand("tinker"' in text
