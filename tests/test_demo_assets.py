"""The bundled demo task and model: reproducible, disjoint from training, loadable offline."""

from __future__ import annotations

import json

import pytest

from reachtui.assets import DEMO_MODEL_DIR, DEMO_TASK_PATH
from reachtui.tasks.demo import (
    PROMPT_TEMPLATE,
    TASK_SEED,
    TASK_SIZE,
    TRAIN_SEED,
    iter_items,
    make_questions,
    task_lines,
    training_items,
)


def _rows():
    return [json.loads(line) for line in DEMO_TASK_PATH.read_text(encoding="utf-8").splitlines()]


def test_task_file_shape():
    rows = _rows()
    assert len(rows) >= 300
    ids = [r["id"] for r in rows]
    assert len(set(ids)) == len(ids)
    assert len({r["question"] for r in rows}) == len(rows)
    for r in rows:
        assert set(r) == {"id", "question", "answer"}
        assert r["answer"].isdigit() and str(int(r["answer"])) == r["answer"]
        assert r["question"].endswith("?")


def test_task_file_regenerates_byte_for_byte():
    expected = "\n".join(task_lines(TASK_SIZE, TASK_SEED)) + "\n"
    assert DEMO_TASK_PATH.read_bytes() == expected.encode("utf-8")


def test_solutions_are_consistent():
    ops = {"+": int.__add__, "-": int.__sub__, "*": int.__mul__}
    for item in make_questions(TASK_SIZE, TASK_SEED):
        assert item.solution.startswith(" ") and item.solution.endswith(f". #### {item.answer}")
        steps = item.solution[1:].split(". #### ")[0].split(". ")
        assert len(steps) in (2, 3) and item.steps == len(steps)
        for step in steps:
            lhs, rhs = step.split("=")
            op = next(c for c in "+-*" if c in lhs)
            a, b = lhs.split(op)
            assert ops[op](int(a), int(b)) == int(rhs) >= 0
        assert int(steps[-1].split("=")[1]) == item.answer


def test_no_demo_question_in_training_data():
    from reachtui.model.training.demo import DEFAULTS  # torch is imported lazily there

    demo = {r["question"] for r in _rows()}
    n = DEFAULTS["steps"] * DEFAULTS["batch_size"]   # exactly what the default training run consumes
    train = training_items(n, seed=DEFAULTS["seed"])
    assert len(train) == n
    assert not demo & {it.question for it in train}
    assert DEFAULTS["seed"] == TRAIN_SEED


def test_no_demo_question_in_the_tuned_models_prompts():
    from reachtui.model.training.examples import held_out_items
    from reachtui.model.training.tuned import DEFAULTS as TUNED

    demo = {r["question"] for r in _rows()}
    for n in (TUNED["steps"] * TUNED["prompts_per_step"], TUNED["rounds"] * TUNED["prompts_per_round"]):
        prompts = {it.question for it in training_items(n, seed=TUNED["seed"])}
        assert len(prompts) > n // 2 and not demo & prompts
        assert not demo & {it.question for it in held_out_items(50, TUNED["seed"] + 10_000, prompts)}
    assert TUNED["seed"] != TRAIN_SEED


def test_training_stream_would_otherwise_overlap_the_task_distribution():
    # Sanity check that the exclusion is not vacuous: the same generator, drawn with the task's seed,
    # produces demo questions, so only the exclusion keeps them out of training.
    demo = {r["question"] for r in _rows()}
    first = [it.question for _, it in zip(range(50), iter_items(TASK_SEED))]
    assert demo & set(first)
    assert not demo & {it.question for it in training_items(200, seed=TASK_SEED)}


@pytest.fixture(scope="module")
def demo_model():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.set_num_threads(1)   # a busy 2-core machine runs two torch threads far slower than one
    tok = transformers.AutoTokenizer.from_pretrained(DEMO_MODEL_DIR, local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(DEMO_MODEL_DIR, local_files_only=True).eval()
    return model, tok


def test_model_directory_small_and_complete():
    files = {p.name for p in DEMO_MODEL_DIR.iterdir()}
    for name in ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                 "tokenizer_config.json", "README.md"):
        assert name in files
    assert sum(p.stat().st_size for p in DEMO_MODEL_DIR.rglob("*") if p.is_file()) <= 10 * 1024 * 1024


def test_model_loads_offline(demo_model):
    import torch

    model, tok = demo_model
    assert type(model).__name__ == "LlamaForCausalLM"
    assert model.config.num_hidden_layers >= 6
    assert len(model.model.layers) == model.config.num_hidden_layers
    assert model.dtype == torch.float32
    for cfg in (model.config, model.generation_config):
        assert cfg.eos_token_id == tok.eos_token_id
        assert cfg.pad_token_id == tok.pad_token_id
        assert cfg.bos_token_id == tok.bos_token_id
    assert tok.eos_token and tok.pad_token


def test_tokenizer_round_trips(demo_model):
    _, tok = demo_model
    text = PROMPT_TEMPLATE.format(question=_rows()[0]["question"]) + " 12+7=19. 19-5=14. #### 14\n"
    ids = tok(text)["input_ids"]
    assert len(ids) == len(text)          # one token per character, no BOS added
    assert tok.unk_token_id not in ids
    assert tok.decode(ids) == text


def test_greedy_generation_has_expected_format(demo_model):
    import torch

    model, tok = demo_model
    rows = _rows()[:5]
    prompts = [PROMPT_TEMPLATE.format(question=r["question"]) for r in rows]
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=48, do_sample=False,
                             pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    texts = tok.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    for text in texts:
        line = text.split("\n", 1)[0]
        assert line.startswith(" ") and "####" in line, repr(text)
        assert line.rsplit("####", 1)[1].strip().isdigit(), repr(text)
