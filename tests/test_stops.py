"""Stop strings found incrementally (reachtui.model.stops) stop exactly where the full-decode rule does: the
first n at which `any(s in tokenizer.decode(tokens[:n], skip_special_tokens=True) for s in stops)`.

Checked on random and adversarial token streams with four kinds of real tokenizers built here (nothing is
downloaded): a character-level one (the engine tests'), a byte-level BPE (GPT-2 style: multi-byte characters
split across tokens), a SentencePiece-style BPE with byte fallback and a Metaspace decoder that strips the
text's first space (Llama style), and a WordPiece one whose decoder joins `##` pieces and cleans up spaces
before punctuation (BERT style)."""

from __future__ import annotations

import random
import zlib

import numpy as np
import pytest

pytest.importorskip("tokenizers")

from reachtui.model.decode import _Rows  # noqa: E402
from reachtui.model.stops import StopWatch, suspect_table  # noqa: E402

CORPUS = ("Question: Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
          "How many clips did Natalia sell altogether in April and May? Answer: 72 #### 72\n\n"
          "Question: Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes. Answer: 10 ####\n"
          "café naïve résumé — 😀 数学 ümlaut. Don't stop; it's fine, isn't it? Yes! a b c. x . y , z ? ") * 4

STOPS = [("\n",), ("Question:",), ("####",), ("\n\n", "Question"), ("é",), ("a b",), ("n't",), ("?",), (" .",),
         ("😀",), ("Answer: 7",)]


def _wrap(tok, **kw):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=tok, **kw)


def char_level():
    from engine_tiny import char_tokenizer

    return char_tokenizer()


def byte_bpe():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([CORPUS], trainer)
    return _wrap(tok, eos_token="<|endoftext|>", clean_up_tokenization_spaces=False)


def sentencepiece_like():
    import json

    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=False)
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<unk>", "<s>", "</s>"], limit_alphabet=40)
    tok.train_from_iterator([CORPUS.replace("😀", "").replace("数学", "")], trainer)
    # byte-fallback tokens <0x00>..<0xFF> as ordinary vocabulary (as in Llama's), not special tokens
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    for i in range(256):
        vocab.setdefault(f"<0x{i:02X}>", len(vocab))
    spec["model"]["byte_fallback"] = True
    return _wrap(Tokenizer.from_str(json.dumps(spec)), bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                 clean_up_tokenization_spaces=False)


def wordpiece():
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=False)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    trainer = trainers.WordPieceTrainer(vocab_size=300, special_tokens=["[UNK]", "[SEP]"])
    tok.train_from_iterator([CORPUS], trainer)
    return _wrap(tok, unk_token="[UNK]", sep_token="[SEP]", clean_up_tokenization_spaces=True)


TOKENIZERS = {"char": char_level, "byte-bpe": byte_bpe, "sentencepiece": sentencepiece_like, "wordpiece": wordpiece}


def reference(tok, ids, stops):
    """The full-decode rule: the first n whose text holds a stop, else None."""
    for n in range(1, len(ids) + 1):
        text = tok.decode(ids[:n], skip_special_tokens=True)
        if any(s in text for s in stops):
            return n
    return None


def incremental(watch, ids):
    """StopWatch.check step by step on one row: the first n it reports, else None."""
    tokens = np.asarray([ids], dtype=np.int64)
    length = np.zeros(1, dtype=np.int64)
    for n in range(1, len(ids) + 1):
        length[0] = n
        if len(watch.check(tokens, length, np.asarray([0]))):
            return n
    return None


def streams(tok, rng: random.Random, count: int):
    """Random id streams, and adversarial ones: encoded text around the stops, cut at random places,
    with random ids (special ones too) spliced in."""
    vocab = len(tok)
    out = [[rng.randrange(vocab) for _ in range(rng.randrange(1, 40))] for _ in range(count)]
    pieces = [s for group in STOPS for s in group] + ["Answer", " ", "\n", "é", "😀", "Question", ":", "#"]
    for _ in range(count):
        text = "".join(rng.choice(pieces) + rng.choice(["", "x", " y", "ab", "."]) for _ in range(rng.randrange(1, 8)))
        ids = tok(text, add_special_tokens=False)["input_ids"]
        out.append(ids)
        if ids and rng.random() < 0.5:
            k = rng.randrange(len(ids) + 1)
            ids = ids[:k] + [rng.randrange(vocab)] + ids[k:]
        if ids:
            out.append(ids[: rng.randrange(1, len(ids) + 1)])
    return out


@pytest.fixture(scope="module", params=list(TOKENIZERS))
def tokenizer(request):
    return TOKENIZERS[request.param]()


@pytest.mark.parametrize("stops", STOPS, ids=[repr(s) for s in STOPS])
def test_incremental_stops_equal_the_full_decode_rule(tokenizer, stops):
    rng = random.Random(zlib.crc32(repr(stops).encode()))
    table = suspect_table(tokenizer, stops)
    assert table is not None and len(table) == len(tokenizer)
    watch = StopWatch(tokenizer, stops, table)
    seen = 0
    for ids in streams(tokenizer, rng, 150):
        want = reference(tokenizer, ids, stops)
        assert incremental(watch, ids) == want, (ids, tokenizer.decode(ids))
        seen += want is not None
    # the streams do reach the stops, where this tokenizer can write them at all
    writable = any(s in tokenizer.decode(tokenizer("x " + s + " x", add_special_tokens=False)["input_ids"])
                   for s in stops)
    assert seen >= 5 or not writable


@pytest.mark.parametrize("stops", [("\n",), ("Question:",), ("####",)])
def test_the_table_spares_most_steps_of_real_text(stops):
    """Level 1 is what keeps the host's work small: on the corpus's own tokens, only a few steps are
    checked further (those whose token can end a stop)."""
    tok = byte_bpe()
    table = suspect_table(tok, stops)
    ids = tok(CORPUS, add_special_tokens=False)["input_ids"]
    checked = sum(bool(table[a] or table[b]) for a, b in zip(ids, ids[1:]))
    assert 0 < checked < 0.3 * len(ids), (checked, len(ids))
    assert table[tok(stops[0], add_special_tokens=False)["input_ids"][-1]]


def test_a_stop_the_incremental_check_misses_is_cut_at_the_end():
    """The final check: rows whose incremental check (levels 2-3) missed their stop still end where the
    full-decode rule ends them; the table only spares rows none of whose tokens can end a stop."""
    tok = byte_bpe()
    stops = ("Question:",)
    rng = random.Random(5)
    rows = [ids for ids in streams(tok, rng, 40) if reference(tok, ids, stops) is not None][:10]
    assert rows
    width = max(map(len, rows))
    watch = StopWatch(tok, stops, suspect_table(tok, stops))
    watch.check = lambda tokens, length, rows: rows[:0]       # an incremental check that misses every stop
    state = _Rows(len(rows), width, {-5}, watch)
    for r, ids in enumerate(rows):
        state.tokens[r, : len(ids)] = ids
        state.length[r] = len(ids)
    state.confirm_final()
    for r, ids in enumerate(rows):
        assert int(state.length[r]) == reference(tok, ids, stops) and state.finish[r] == 2
