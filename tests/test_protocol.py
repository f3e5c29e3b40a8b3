"""The protocol: a stable hash over every outcome field, round trips, validation, prompt rendering."""

import json
import math
from dataclasses import replace

import pytest

from reachtui.errors import ReachError
from reachtui.protocol import (
    ControlParams,
    MctsParams,
    ProbeSpec,
    Protocol,
    RouteSamplerParams,
    load_protocol_file,
    protocol_from_options,
    protocol_to_toml,
)

FIXED = Protocol(
    template="Q: {question}\nA:",
    fewshot=(("1+1?", "2"),),
    answer_format="number",
    stop=("\n", "Q:"),
    max_new_tokens=64,
    probes=(ProbeSpec("routes", budget=8), ProbeSpec("sample", budget=32, temperature=0.7, top_p=0.95)),
    routes_mode="per_question",
    route_sampler=RouteSamplerParams(max_actions=2),
    mcts=MctsParams(lam=3.0),
    seed=1234,
)


def test_hash_is_stable():
    # These literals guard against accidental changes: a new hash makes every stored run incomparable.
    # Change them only on purpose, when the protocol's meaning changes.
    # (Changed when the protocol gained `control`, the chance control's derangement seed and strata, and
    # when new runs drew with sampler 2: version 1 keeps the earlier hashes, below.)
    assert Protocol().hash() == "3f84a7f315bb"
    assert FIXED.hash() == "fe4089615292"
    assert replace(FIXED, sampler=1).hash() == "4b1732ce2364"
    assert len(FIXED.hash()) == 12 and FIXED.hash() == Protocol.from_dict(FIXED.to_dict()).hash()


@pytest.mark.parametrize(
    "change",
    [
        dict(template="Question: {question}\nA:"),
        dict(system="Be brief."),
        dict(fewshot=()),
        dict(fewshot=(("1+1?", "3"),)),
        dict(answer_format="math"),
        dict(stop=("\n",)),
        dict(max_new_tokens=65),
        dict(temperature=0.5),
        dict(top_p=0.9),
        dict(probes=(ProbeSpec("routes", budget=9), ProbeSpec("sample", budget=32, temperature=0.7, top_p=0.95))),
        dict(probes=(ProbeSpec("routes", budget=8), ProbeSpec("sample", budget=32, temperature=0.8, top_p=0.95))),
        dict(probes=(ProbeSpec("routes", budget=8), ProbeSpec("sample", budget=32, temperature=0.7))),
        dict(probes=(ProbeSpec("routes", budget=8),)),
        dict(routes_mode="shared"),
        dict(route_sampler=RouteSamplerParams(max_actions=3)),
        dict(route_sampler=RouteSamplerParams(max_actions=2, keep_last=False)),
        dict(mcts=MctsParams(lam=3.0, c=1.0)),
        dict(mcts=MctsParams(lam=3.0, p_random=0.2)),
        dict(mcts=MctsParams(lam=3.0, widening=0.0)),
        dict(seed=1235),
        dict(chat=True),
        dict(control=ControlParams(seed=1)),
        dict(control=ControlParams(strata="none")),
    ],
)
def test_hash_changes_with_every_outcome_field(change):
    assert replace(FIXED, **change).hash() != FIXED.hash()


def test_hashes_of_runs_stored_before_a_setting_existed_do_not_change():
    """mcts.widening and sampler came later; at the value used before (2.0, sampler 1) they stay out of the
    hash, and a stored protocol that lacks `sampler` was drawn with version 1."""
    old = Protocol(sampler=1)
    assert old.hash() == "22e6d13f2511"
    assert Protocol(probes=(ProbeSpec("mcts", budget=16),), sampler=1).hash() == "f573acac205f"
    assert Protocol(mcts=MctsParams(widening=1.0), sampler=1).hash() != "22e6d13f2511"
    assert '"widening"' not in old.canonical_json() and old.to_dict()["mcts"]["widening"] == 2.0
    assert '"sampler"' not in old.canonical_json() and '"sampler":2' in Protocol().canonical_json()
    stored = Protocol.from_dict(json.loads(old.canonical_json()), stored=True)
    assert stored.sampler == 1 and stored.hash() == "22e6d13f2511"
    # a protocol file written by hand without `sampler` takes the current one
    assert Protocol.from_dict({"seed": 0}).sampler == 2 and Protocol.from_dict({"seed": 0}).hash() == "3f84a7f315bb"


def test_an_unknown_sampler_version_is_refused():
    with pytest.raises(ReachError, match="sampler must be one of 1, 2"):
        Protocol(sampler=3)


def test_the_graders_version_is_part_of_the_hash(monkeypatch):
    import reachtui.grading

    before = Protocol().hash()
    monkeypatch.setattr(reachtui.grading, "GRADER_VERSION", 2)
    stored = json.loads(Protocol().canonical_json())
    assert stored["grader"] == 2 and Protocol().hash() != before
    assert Protocol.from_dict(stored) == Protocol()
    assert Protocol.from_dict(stored).hash() == Protocol().hash()


def test_equal_protocols_written_differently_hash_the_same():
    a = replace(FIXED, probes=tuple(reversed(FIXED.probes)), max_new_tokens=64.0)
    assert a == FIXED and a.hash() == FIXED.hash()
    assert ProbeSpec("sample", temperature=1) == ProbeSpec("sample", temperature=1.0)
    assert isinstance(ProbeSpec("sample", temperature=1).temperature, float)


def test_probe_temperature_defaults():
    assert ProbeSpec("sample").temperature == 1.0
    assert ProbeSpec("routes").temperature == 0.0 and ProbeSpec("mcts").temperature == 0.0


def test_dict_round_trip_is_json_ready():
    d = FIXED.to_dict()
    assert Protocol.from_dict(json.loads(json.dumps(d))) == FIXED
    assert Protocol.from_dict({}) == Protocol()
    assert d["mcts"] == {"c": math.sqrt(2), "lam": 3.0, "p_random": 0.1, "widening": 2.0}


def test_toml_round_trip(tmp_path):
    for p in (FIXED, Protocol(), replace(FIXED, probes=(), system='say "hi"\tnow'), Protocol(chat=True),
              Protocol(control=ControlParams(seed=7, strata="none"))):
        path = tmp_path / "p.toml"
        path.write_text(protocol_to_toml(p))
        assert load_protocol_file(path) == p


def test_toml_written_by_hand(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text(
        'chat = true\nsystem = "Reason, then answer."\nanswer_format = "choice"\nchoices = 4\nseed = 3\n'
        '[[fewshot]]\nquestion = "2+2?"\nanswer = "4"\n'
        '[mcts]\nlam = 2\n[[probes]]\nname = "mcts"\nbudget = 4\n'
    )
    p = load_protocol_file(path)
    assert p.template == "{question}" and p.fewshot == (("2+2?", "4"),) and p.choices == 4
    assert p.mcts == MctsParams(lam=2.0) and p.probes == (ProbeSpec("mcts", budget=4),)


@pytest.mark.parametrize(
    "text,message",
    [
        ("bogus = 1\n", r"p\.toml: unknown key 'bogus'"),
        ("[mcts]\ngamma = 1\n", r"p\.toml: unknown key mcts\.'gamma'"),
        ("[[probes]]\nname = 'sample'\nk = 3\n", r"p\.toml: unknown key probes\.'k'"),
        ("max_new_tokens = \n", r"p\.toml: not valid TOML"),
        ("[[probes]]\nname = 'beam'\n", r"p\.toml: unknown probe 'beam'"),
        ("temperature = 'hot'\n", r"p\.toml: temperature must be a number"),
        ("[control]\nstrata = 'digits'\n", r"p\.toml: control\.strata must be one of format, none"),
        ("[control]\nseed = -1\n", r"p\.toml: control\.seed must be >= 0"),
    ],
)
def test_protocol_file_errors(tmp_path, text, message):
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(ReachError, match=message) as exc:
        load_protocol_file(path)
    assert "\n" not in str(exc.value)


def test_missing_protocol_file(tmp_path):
    with pytest.raises(ReachError, match="no such protocol file"):
        load_protocol_file(tmp_path / "none.toml")


def test_unknown_key_in_dict_is_named():
    with pytest.raises(ReachError, match="unknown key 'budget'"):
        Protocol.from_dict({"budget": 3})


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda: ProbeSpec("sample", budget=0), "budget must be at least 1"),
        (lambda: ProbeSpec("beam"), "unknown probe 'beam'"),
        (lambda: ProbeSpec("sample", temperature=-0.1), "temperature must be >= 0"),
        (lambda: ProbeSpec("sample", top_p=0), r"top_p must be in \(0, 1\]"),
        (lambda: Protocol(top_p=1.5), r"top_p must be in \(0, 1\]"),
        (lambda: Protocol(temperature=-1), "temperature must be >= 0"),
        (lambda: Protocol(temperature=float("nan")), "must be finite"),
        (lambda: Protocol(template="Q:"), r"template must contain \{question\}"),
        (lambda: Protocol(answer_format="roman"), "unknown answer_format 'roman'"),
        (lambda: Protocol(max_new_tokens=0), "max_new_tokens must be at least 1"),
        (lambda: Protocol(max_new_tokens=2.5), "must be a whole number"),
        (lambda: Protocol(routes_mode="each"), "routes_mode must be one of shared, per_question"),
        (lambda: Protocol(probes=(ProbeSpec("sample"), ProbeSpec("sample"))), "listed twice"),
        (lambda: Protocol(choices=4), "only goes with answer_format = 'choice'"),
        (lambda: Protocol(stop=("",)), "stop must be a list of non-empty strings"),
        (lambda: Protocol(seed=-1), "seed must be >= 0"),
        (lambda: Protocol(chat="yes"), "chat must be true or false"),
        (lambda: RouteSamplerParams(min_frac=1.5, max_frac=1.2), "min_frac <= max_frac"),
        (lambda: MctsParams(p_random=2), r"p_random must be in \[0, 1\]"),
    ],
)
def test_validation(make, message):
    with pytest.raises(ReachError, match=message) as exc:
        make()
    assert "\n" not in str(exc.value)


def test_chat_template_may_omit_question_placeholder():
    assert Protocol(chat=True, template="Solve it.").template == "Solve it."


def test_render_plain_and_fewshot():
    assert Protocol().render_prompt("What is {2}+3?") == "Question: What is {2}+3?\nAnswer:"
    p = Protocol(fewshot=(("1+1?", "#### 2"), ("2+5?", "\n#### 7")), system="Solve.")
    assert p.render_prompt("3+3?") == (
        "Solve.\n\nQuestion: 1+1?\nAnswer: #### 2\n\nQuestion: 2+5?\nAnswer:\n#### 7\n\nQuestion: 3+3?\nAnswer:"
    )


def test_options_apply_cli_flags():
    base = Protocol(probes=(ProbeSpec("sample", budget=4, temperature=0.5),))
    p = protocol_from_options(base, probes="realized, routes,sample", budget=8, temperature=0.9, seed=5,
                              max_new_tokens=20)
    assert p.probes == (ProbeSpec("sample", budget=8, temperature=0.9), ProbeSpec("routes", budget=8))
    assert (p.seed, p.max_new_tokens) == (5, 20)
    assert protocol_from_options(base, probes="realized").probes == ()
    assert protocol_from_options(base) == base
    p = protocol_from_options(base, probes=["mcts"])
    assert p.probes == (ProbeSpec("mcts"),)
    assert protocol_from_options(Protocol(), chat=True).template == "{question}"
    with pytest.raises(ReachError, match="unknown probe 'beam'"):
        protocol_from_options(base, probes="sample,beam")
    with pytest.raises(ReachError, match="budget must be at least 1"):
        protocol_from_options(base, budget=0)


# ---------------------------------------------------------------------------------------- chat

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>"
    "{% if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}{% endif %}"
)
NO_SYSTEM_TEMPLATE = (
    "{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"
)


def _tokenizer(chat_template):
    pytest.importorskip("transformers")
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel({"[UNK]": 0}, unk_token="[UNK]")))
    tok.chat_template = chat_template
    return tok


def test_render_chat_with_system_fewshot_and_thinking_off():
    tok = _tokenizer(CHAT_TEMPLATE)
    p = Protocol(chat=True, template="{question}", system="Be brief.", fewshot=(("1+1?", "2"),))
    assert p.render_prompt("2+2?", tok) == (
        "<|system|>Be brief.\n<|user|>1+1?\n<|assistant|>2\n<|user|>2+2?\n<|assistant|><think></think>"
    )


def test_chat_errors_are_one_line():
    with pytest.raises(ReachError, match="needs the model's tokenizer"):
        Protocol(chat=True).render_prompt("q")
    with pytest.raises(ReachError, match="has no chat template"):
        Protocol(chat=True).render_prompt("q", _tokenizer(None))
    with pytest.raises(ReachError, match="System role not supported"):
        Protocol(chat=True, system="s").render_prompt("q", _tokenizer(NO_SYSTEM_TEMPLATE))
    # a template that refuses without a word: its error's type, not an IndexError (`errors.first_line`)
    with pytest.raises(ReachError, match=r"^protocol: the chat template refused the prompt: TemplateError$"):
        Protocol(chat=True).render_prompt("q", _tokenizer("{{ raise_exception('') }}"))


def test_match_keys_are_per_probe():
    """A probe's key covers the deployment and its own settings only: adding a probe, or changing another
    probe, the route sampler for a probe that draws no routes, or the chance control, leaves it as it is;
    the sampler version counts only where something samples."""
    from dataclasses import replace

    from reachtui.protocol import ControlParams, ProbeSpec, Protocol, RouteSamplerParams, match_differences

    base = Protocol(probes=(ProbeSpec("sample", budget=4), ProbeSpec("routes", budget=4)))
    keys = base.match_keys()
    assert set(keys) == {"realized", "sample", "routes"} and all(len(k) == 12 for k in keys.values())
    more = replace(base, probes=base.probes + (ProbeSpec("mcts", budget=4),))
    assert more.hash() != base.hash() and {p: more.match_keys()[p] for p in keys} == keys
    other_routes = replace(base, probes=(ProbeSpec("sample", budget=4), ProbeSpec("routes", budget=8)))
    assert other_routes.match_keys()["sample"] == keys["sample"]
    assert other_routes.match_keys()["routes"] != keys["routes"]
    assert match_differences(base, other_routes, "routes") == ["budget 4 vs 8"]
    sampler = replace(base, route_sampler=RouteSamplerParams(max_block=3))
    assert sampler.match_keys()["sample"] == keys["sample"] and sampler.match_keys()["routes"] != keys["routes"]
    assert match_differences(base, sampler, "routes") == ["route_sampler.max_block 4 vs 3"]
    control = replace(base, control=ControlParams(seed=7))
    assert control.hash() != base.hash() and control.match_keys() == keys
    # sampler 1 vs 2: the sample probe samples, greedy routes and the greedy default do not
    old = replace(base, sampler=1)
    assert old.match_keys()["sample"] != keys["sample"]
    assert old.match_keys()["routes"] == keys["routes"] and old.match_keys()["realized"] == keys["realized"]
    hot = replace(base, temperature=0.7)
    assert replace(hot, sampler=1).match_keys()["realized"] != hot.match_keys()["realized"]
    assert match_differences(hot, replace(hot, sampler=1)) == ["sampler 2 vs 1"]
    for field, value in (("template", "Q: {question}\nA:"), ("max_new_tokens", 32), ("stop", ("\n\n",)),
                         ("seed", 1), ("answer_format", "math"), ("system", "Be brief."), ("chat", True),
                         ("fewshot", (("1+1?", "2"),)), ("top_p", 0.9)):
        changed = replace(base, **{field: value})
        assert all(changed.match_keys()[p] != keys[p] for p in keys), field
        assert match_differences(base, changed)[0].startswith(field), field
