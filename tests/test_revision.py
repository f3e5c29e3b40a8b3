"""`--revision` for a Hugging Face id: a local hub cache made here holds one repository at two commits (the
demo model on main, demo-tuned on the tag v2); the revision picks the snapshot config, tokenizer and weights
load from, the run calls the model ID@REV, and a revision the cache lacks is one line (nothing fetched)."""

from __future__ import annotations

import json
import sqlite3

import pytest
from conftest import run_main

from reachtui.assets import BUNDLED_MODELS

MAIN, V2 = "a" * 40, "b" * 40


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """HF_HUB_CACHE with models--org--tiny: refs/main -> the demo model, refs/v2 -> demo-tuned."""
    repo = tmp_path / "hub" / "models--org--tiny"
    for commit, model in ((MAIN, "demo"), (V2, "demo-tuned")):
        snap = repo / "snapshots" / commit
        snap.mkdir(parents=True)
        for f in BUNDLED_MODELS[model].iterdir():
            if f.suffix in (".json", ".safetensors"):
                (snap / f.name).symlink_to(f)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(MAIN)
    (repo / "refs" / "v2").write_text(V2)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return repo


def test_a_revision_picks_the_weights(hub):
    import torch

    from reachtui.generation import Decoding
    from reachtui.model.load import load_model
    from reachtui.model.run import Runner
    from reachtui.protocol import Protocol
    from reachtui.tasks import load_task

    torch.set_num_threads(1)
    prompts = [Protocol().render_prompt(q.question) for q in load_task("demo").questions[:8]]

    def tokens(spec):
        loaded = load_model(spec, device="cpu")
        return loaded, [g.token_ids for g in Runner(loaded).generate(prompts, decoding=Decoding(max_new_tokens=16))]

    _, base = tokens("demo")
    _, tuned = tokens("demo-tuned")
    assert base != tuned                                  # the two commits differ where the test looks
    main, main_tokens = tokens("org/tiny")
    v2, v2_tokens = tokens("org/tiny@v2")
    by_commit, commit_tokens = tokens(f"org/tiny@{V2}")
    assert (main_tokens, v2_tokens, commit_tokens) == (base, tuned, tuned)
    assert (main.name, v2.name, by_commit.name) == ("org/tiny", "org/tiny@v2", f"org/tiny@{V2}")
    assert v2.path == hub / "snapshots" / V2


def test_the_run_records_the_revision(hub, tmp_path):
    store = tmp_path / "s.sqlite"
    args = ["audit", "org/tiny", "--revision", "v2", "--task", "demo", "--probes", "realized", "--limit", "2",
            "--store", str(store), "--device", "cpu", "--threads", "1"]
    code, out, err = run_main(args)
    assert code == 0, err
    con = sqlite3.connect(store)
    assert con.execute("SELECT m.name, m.path FROM models m").fetchall() == [("org/tiny@v2",
                                                                             str(hub / "snapshots" / V2))]
    con.close()
    code, out, err = run_main(["generate", "org/tiny", "What is 2 plus 2?", "--revision", "v2", "--json"])
    assert code == 0, err
    assert json.loads(out)["model"] == "org/tiny@v2"


def test_bad_revisions_are_one_line(hub, tmp_path):
    cache = hub.parent
    for args, said in (
        (["generate", "org/tiny", "1 + 1?", "--revision", "v9"],
         f"model 'org/tiny' at revision 'v9' not found: not a directory, and the Hugging Face cache at {cache} "
         f"holds only main, v2, {MAIN[:12]}, {V2[:12]} (pass --allow-download to fetch it)"),
        (["audit", "org/tiny", "--revision", "v9", "--allow-download", "--task", "demo", "--store",
          str(tmp_path / "s.sqlite")],
         f"model 'org/tiny' at revision 'v9' is not in the Hugging Face cache at {cache}, and HF_HUB_OFFLINE is set"),
        (["generate", "demo", "1 + 1?", "--revision", "main"],
         "--revision main: 'demo' is not a Hugging Face id (a bundled model or a directory has no revisions)"),
        (["generate", "org/tiny@v2", "1 + 1?", "--revision", "main"],
         "--revision main: 'org/tiny@v2' already names a revision"),
        (["generate", "org/tiny@../../models--org--tiny/refs/v2", "1 + 1?"],
         f"model 'org/tiny' at revision '../../models--org--tiny/refs/v2' not found: not a directory, and the Hugging "
         f"Face cache at {cache} holds only main, v2, {MAIN[:12]}, {V2[:12]} (pass --allow-download to fetch it)"),
        (["open", "--revision", "main", "--store", str(tmp_path / "s.sqlite")],
         "--revision names a revision of MODEL: give MODEL"),
    ):
        code, out, err = run_main(args)
        assert (code, out, err) == (2, "", f"error: {said}\n"), args
