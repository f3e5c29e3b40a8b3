import math

import pytest

from blind_reference import Candidate as C
from blind_reference import blind_correct, select, select_logprob, select_vote


def test_vote_majority_wins():
    cands = [C("3", -0.1), C("4", -0.5, True), C("4", -0.9, True), C(None, -0.01)]
    assert select_vote(cands) == 1
    assert blind_correct("vote", cands)


def test_vote_tie_goes_to_highest_logprob_answer():
    cands = [C("3", -0.9), C("4", -0.2, True), C("3", -0.8), C("4", -0.7, True)]
    assert select_vote(cands) == 1


def test_vote_exact_tie_goes_to_earliest():
    cands = [C("5", -0.5), C("6", -0.5)]
    assert select_vote(cands) == 0


def test_none_answers_do_not_vote():
    cands = [C(None, -0.1), C(None, -0.1), C("7", -2.0, True)]
    assert select_vote(cands) == 2
    assert select_vote([C(None, -0.1)]) is None
    assert not blind_correct("vote", [C(None, -0.1)])
    assert select_vote([]) is None


def test_logprob_picks_highest_and_ignores_nan():
    cands = [C("1", math.nan), C("2", -0.3), C("3", -0.2, True), C("4", None)]
    assert select_logprob(cands) == 2
    assert blind_correct("logprob", cands)
    assert select_logprob([]) is None
    assert select_logprob([C("1", -1.0), C("2", -1.0)]) == 0


def test_unknown_selector():
    with pytest.raises(ValueError):
        select("oracle", [C("1", 0.0)])
