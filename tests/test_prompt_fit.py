"""Over-long prompts are found before the model loads (`reachtui.engine.fits`): one line with the count, the
first question ids, the longest prompt and the limit, offering only fixes that can work; `--skip-long` audits
the rest, stores the left-out ids with the run (and keeps them when it resumes), and every table, the closing
table and the app's header say how many were left out. A refusal leaves the store as it was."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest

from cli_helpers import HAVE_DEMO, fingerprint
from conftest import run_main
from fake_runner import FakeRunner
from reachtui.engine.audit import run_audit
from reachtui.engine.fits import prompt_fit
from reachtui.errors import ReachError
from reachtui.protocol import ProbeSpec, Protocol
from reachtui.store import Store
from reachtui.store.schema import SCHEMA_VERSION
from reachtui.tables import TABLES, build_table
from reachtui.tasks import load_task


class CharTokenizer:
    """One token per character, and a BOS token when special tokens are added (as the demo model's)."""

    bos_token = "<s>"

    def __init__(self):
        self.tokenized = 0     # characters tokenized so far

    def get_vocab(self):
        return {"<pad>": 0, "<s>": 1, "</s>": 2, **{chr(c): c for c in range(32, 127)}}

    def __call__(self, texts, add_special_tokens=True):
        one = isinstance(texts, str)
        rows = [texts] if one else list(texts)
        self.tokenized += sum(len(t) for t in rows)
        ids = [[1] * add_special_tokens + [7] * len(t) for t in rows]
        return {"input_ids": ids[0] if one else ids}


def never():
    raise AssertionError("the tokenizer was loaded for prompts that fit by their bytes")


def fit(protocol, questions, limit=512, tok=None):
    tok = tok or CharTokenizer()
    return prompt_fit(protocol, questions, limit, tokenizer=lambda: tok), tok


# --------------------------------------------------------------------------------------------- the check


def test_short_prompts_fit_without_loading_a_tokenizer():
    got = prompt_fit(Protocol(), [("a", "What is 1 + 2?"), ("b", "x" * 400)], 512, tokenizer=never)
    assert got.over == () and got.n == 2
    got.check(skip_long=False)


def test_a_refusal_names_the_count_the_ids_the_longest_and_the_fixes_that_work():
    questions = [("q0", "What is 1 + 2?"), ("q1", "y" * 470), ("q2", "z" * 460), ("q3", "What is 2 + 2?")]
    got, _ = fit(Protocol(), questions)       # prompt = "Question: " + q + "\nAnswer:" (18 characters) + BOS
    assert got.over == (("q1", 489), ("q2", 479)) and got.longest == 489
    with pytest.raises(ReachError) as caught:
        got.check(skip_long=False)
    assert str(caught.value) == (
        "2 of 4 questions do not fit the model's position limit of 512 tokens with --max-new-tokens 48 (question "
        "ids q1, q2; the longest prompt is 489 tokens); --max-new-tokens 23 makes every prompt fit; or --skip-long "
        "audits the other 2")
    got.check(skip_long=True)          # the others are audited


def test_a_prompt_longer_than_the_limit_gets_no_max_new_tokens_advice_and_ids_are_cut_after_five():
    questions = [(f"id-{i}", "w" * (600 + i)) for i in range(7)] + [("ok", "What is 1 + 2?")]
    got, _ = fit(Protocol(max_new_tokens=64), questions)
    assert str(pytest.raises(ReachError, got.check, skip_long=False).value) == (
        "7 of 8 questions do not fit the model's position limit of 512 tokens with --max-new-tokens 64 (question "
        "ids id-0, id-1, id-2, id-3, id-4 and 2 more; the longest prompt is 625 tokens); --skip-long audits the "
        "other 1")


def test_when_nothing_fits_skip_long_is_not_offered_and_the_frame_is_named_only_where_it_can_help():
    shots = tuple((f"What is {i} + {i}?", f"{i} + {i} = {2 * i}. #### {2 * i}") for i in range(20))
    protocol = Protocol(fewshot=shots, system="Solve it.")
    got, _ = fit(protocol, [("a", "What is 1 + 2?"), ("b", "What is 3 + 4?")], limit=1200)
    assert got.frame == len(protocol.render_prompt("")) + 1 == 1140          # + BOS
    assert str(pytest.raises(ReachError, got.check, skip_long=True).value) == (
        "2 of 2 questions do not fit the model's position limit of 1,200 tokens with --max-new-tokens 48 (question "
        "ids a, b; the longest prompt is 1,154 tokens); --skip-long leaves nothing to audit; --max-new-tokens 46 "
        "makes every prompt fit; or the prompt around the question takes 1,140 tokens: fewer --fewshot examples "
        "(20 now) or a shorter --system")
    # the question itself is over: neither a lower --max-new-tokens nor a shorter frame can help
    got, _ = fit(Protocol(), [("a", "v" * 700), ("b", "u" * 800)])
    assert str(pytest.raises(ReachError, got.check, skip_long=False).value) == (
        "2 of 2 questions do not fit the model's position limit of 512 tokens with --max-new-tokens 48 (question "
        "ids a, b; the longest prompt is 819 tokens); the questions themselves are too long for this model")


def test_twenty_thousand_few_shot_examples_are_refused_without_tokenizing_a_prompt():
    shots = tuple((f"Sam has {i} apples and buys {i} more. How many now?", f"{i}+{i}={2 * i}. #### {2 * i}")
                  for i in range(20_000))
    protocol = Protocol(fewshot=shots)
    questions = [(str(i), f"What is {i} + 1?") for i in range(1319)]
    t0 = time.monotonic()
    got, tok = fit(protocol, questions)
    seconds = time.monotonic() - t0
    assert tok.tokenized == 0                  # refused by its characters: nothing tokenized, one prompt rendered
    assert seconds < 5, seconds                # a render of ~1.5 million characters, not 1,319 of them
    assert len(got.over) == 1319 and got.at_least
    assert str(pytest.raises(ReachError, got.check, skip_long=True).value) == (
        f"1,319 of 1,319 questions do not fit the model's position limit of 512 tokens with --max-new-tokens 48 "
        f"(question ids 0, 1, 2, 3, 4 and 1,314 more; the longest prompt is at least {got.longest:,} tokens); "
        f"--skip-long leaves nothing to audit; the prompt around the question is too long by itself: fewer "
        f"--fewshot examples (20,000 now)")
    assert got.longest >= len(protocol.render_prompt("")) // 5      # the vocabulary's longest entry: 5 characters


def test_a_prompt_far_over_the_limit_is_over_by_its_characters_and_the_others_are_tokenized_once():
    tok = CharTokenizer()
    got, _ = fit(Protocol(), [("huge", "h" * 150_000), ("long", "l" * 500), ("short", "What is 1 + 2?")], tok=tok)
    assert got.over == (("huge", None), ("long", 519))
    assert tok.tokenized == len(Protocol().render_prompt("l" * 500)) + len(Protocol().render_prompt(""))


# ------------------------------------------------------------------------------------- the engine and store


class ShortRunner(FakeRunner):
    """The fake model with 120 positions, counting a prompt's characters as its tokens."""

    max_positions = 120

    def prompt_lengths(self, prompts):
        return [len(p) for p in prompts]


def _task(tmp_path, long=(1, 4)):
    path = tmp_path / "t.jsonl"
    rows = [{"id": f"q{i}", "question": f"What is {i} + 3?" + (" Think hard." * 8 if i in long else ""),
             "answer": str(i + 3)} for i in range(6)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return load_task(str(path))


PROTOCOL = Protocol(probes=(ProbeSpec("sample", budget=2),), max_new_tokens=16)


def test_the_engine_refuses_before_the_store_is_touched(tmp_path):
    path = tmp_path / "s.sqlite"
    Store(path).close()
    before = fingerprint(path)
    with Store(path) as store, pytest.raises(ReachError, match=r"^2 of 6 questions do not fit .*question ids q1, q4;"):
        run_audit(store, ShortRunner(), model_name="fake", task=_task(tmp_path), protocol=PROTOCOL)
    assert fingerprint(path) == before


def test_skip_long_stores_the_left_out_ids_and_a_resumed_run_keeps_them(tmp_path):
    path = tmp_path / "s.sqlite"
    task = _task(tmp_path)
    with Store(path) as store:
        first = run_audit(store, ShortRunner(), model_name="fake", task=task, protocol=PROTOCOL, skip_long=True)
        store.set_run_status(first.run_id, "cancelled")       # as an interrupted audit leaves it
        again = run_audit(store, ShortRunner(), model_name="fake", task=task, protocol=PROTOCOL, skip_long=True)
    assert again.run_id == first.run_id and again.resumed and again.status == "complete"
    con = sqlite3.connect(path)
    assert con.execute("SELECT s.run_id, q.qid, s.prompt_tokens FROM skipped_questions s JOIN questions q "
                       "ON q.id = s.question_id ORDER BY q.idx").fetchall() == [
        (1, "q1", len(PROTOCOL.render_prompt(task.questions[1].question))),
        (1, "q4", len(PROTOCOL.render_prompt(task.questions[4].question)))]
    assert con.execute("SELECT q.qid FROM run_questions r JOIN questions q ON q.id = r.question_id "
                       "ORDER BY q.idx").fetchall() == [("q0",), ("q2",), ("q3",), ("q5",)]
    assert con.execute("SELECT n_questions FROM runs").fetchall() == [(4,)]
    assert con.execute("SELECT count(DISTINCT question_id) FROM attempts").fetchone() == (4,)


NOTE = ("run {run} left out 2 of 6 questions: their prompts do not fit the model's positions (--skip-long; ids "
        "q1, q4); every figure is over the other 4")


@pytest.fixture
def skipped_store(tmp_path):
    path = tmp_path / "s.sqlite"
    task = _task(tmp_path)
    with Store(path) as store:
        run_audit(store, ShortRunner(), model_name="fake", task=task, protocol=PROTOCOL, skip_long=True,
                  mlp_scan="sample")
        run_audit(store, ShortRunner(), model_name="other", task=task, protocol=PROTOCOL, skip_long=True)
    return path


def test_every_table_says_how_many_questions_were_left_out(skipped_store):
    with Store(skipped_store, readonly=True) as store:
        for name in TABLES:
            runs = [1, 2] if name.startswith("compare") else [1]
            notes = build_table(store, name, runs).notes
            assert NOTE.format(run=1) in notes, name
            if name.startswith("compare"):
                assert NOTE.format(run=2) in notes, name


def test_exports_and_the_closing_table_say_it_in_every_format(skipped_store):
    s = str(skipped_store)
    md = run_main(["export", "summary", "--run", "1", "--store", s, "--format", "md", "--columns", "probe,n"])
    assert md[0] == 0 and f"_{NOTE.format(run=1)}_  " in md[1].splitlines()
    tex = run_main(["export", "questions", "--run", "1", "--store", s, "--format", "latex", "--columns", "question_id"])
    assert f"% {NOTE.format(run=1)}".replace("_", "\\_") in tex[1].splitlines()
    for fmt in ("csv", "json", "tsv", "ndjson"):
        code, out, err = run_main(["export", "passk", "--run", "1", "--store", s, "--format", fmt])
        assert code == 0 and f"note: {NOTE.format(run=1)}" in err.splitlines(), fmt
    code, out, _err = run_main(["compare", "1", "2", "--store", s])
    assert code == 0 and NOTE.format(run=1).split(":")[0] in out and NOTE.format(run=2).split(":")[0] in out
    from reachtui.tables.summary import closing

    with Store(skipped_store, readonly=True) as store:
        table, lines = closing(store, 1)
    assert table.title == "run 1: realized vs reachable, % of 4 questions, 2 left out (too long)"
    assert NOTE.format(run=1) in lines


def test_runs_list_and_the_app_header_count_the_left_out_questions(skipped_store):
    from reachtui.tui.data import AuditData
    from reachtui.tui.state import counters
    from reachtui.tui.widgets.panes import counter_text

    data = AuditData(skipped_store)
    try:
        run = data.run(1)
        rows = data.rows(run)
        text = counter_text(run, counters(rows, run.probes)).plain
    finally:
        data.close()
    assert run.n_skipped == 2 and len(rows) == 4
    assert text.endswith("│ n=4, 2 left out (too long)")
    code, out, _ = run_main(["runs", "--json", "--store", str(skipped_store)])
    assert [r["n_skipped"] for r in json.loads(out)] == [2, 2]


def test_a_version_6_store_is_read_as_it_is_and_a_writer_adds_the_table(skipped_store, tmp_path):
    con = sqlite3.connect(skipped_store)
    con.execute("DROP TABLE skipped_questions")
    con.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    with Store(skipped_store, readonly=True) as store:
        assert store.skipped_questions(1) == [] and build_table(store, "summary", [1]).rows
    with Store(skipped_store) as store:
        assert store.skipped_questions(1) == []
        assert store.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)


# ------------------------------------------------------------------------------------- the commands


@pytest.fixture
def long_task(tmp_path):
    path = tmp_path / "long.jsonl"
    rows = [{"id": f"k{i}", "question": ("Count the apples. " * 30 if i in (2, 5) else f"What is {i} + 1?"),
             "answer": str(i + 1)} for i in range(7)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


REFUSED = ("error: 2 of 7 questions do not fit the model's position limit of 512 tokens with --max-new-tokens 48 "
           "(question ids k2, k5; the longest prompt is 558 tokens); --skip-long audits the other 5\n")


@pytest.mark.skipif(not HAVE_DEMO, reason="no demo model in assets/")
def test_audit_and_open_refuse_before_the_model_loads_and_leave_the_store_as_it_was(tmp_path, long_task):
    store = tmp_path / "s.sqlite"
    argv = ["demo", "--task", str(long_task), "--store", str(store)]
    assert run_main(["audit", *argv]) == (2, "", REFUSED)
    assert not store.exists()                         # no store made for a refused audit
    Store(store).close()
    before = fingerprint(store)
    assert run_main(["audit", *argv, "--probes", "realized"]) == (2, "", REFUSED)
    assert run_main(["open", *argv]) == (2, "", REFUSED)
    assert fingerprint(store) == before


@pytest.mark.skipif(not HAVE_DEMO, reason="no demo model in assets/")
def test_generate_refuses_a_prompt_over_the_positions_before_loading(tmp_path):
    code, out, err = run_main(["generate", "demo", "Count the apples. " * 28])
    assert (code, out, err) == (2, "", "error: PROMPT: the prompt is 522 tokens; with --max-new-tokens 48 it does "
                                       "not fit the model's position limit of 512 tokens; the question itself is "
                                       "too long for this model\n")


@pytest.mark.skipif(not HAVE_DEMO, reason="no demo model in assets/")
def test_audit_skip_long_says_what_it_leaves_out_and_its_run_keeps_it(tmp_path, long_task):
    store = tmp_path / "s.sqlite"
    argv = ["audit", "demo", "--task", str(long_task), "--store", str(store), "--probes", "realized", "--skip-long",
            "--threads", "1"]
    code, out, err = run_main(argv)
    assert code == 0, err
    assert err.splitlines()[0] == ("--skip-long: leaving out 2 of 7 questions whose prompt plus --max-new-tokens 48 "
                                   "does not fit the model's position limit of 512 tokens (question ids k2, k5); "
                                   "the run stores them")
    assert "run 1: realized vs reachable, % of 5 questions, 2 left out (too long)" in out
    note = ("run 1 left out 2 of 7 questions: their prompts do not fit the model's positions (--skip-long; ids k2, "
            "k5); every figure is over the other 5")
    code, out, err = run_main(["export", "questions", "--store", str(store), "--csv", "--columns", "question_id"])
    assert out.splitlines() == ["question_id", "k0", "k1", "k3", "k4", "k6"] and f"note: {note}" in err
    with Store(store, readonly=True) as s:
        assert s.skipped_questions(1) == [("k2", 558), ("k5", 558)]
