"""The panel statistics against independent computations: tau_AP under ties against the mean over
every order of the tied systems, Kendall's tau-b against a count of pairs, the sign-flip p-value
against plain-Python enumeration, scipy's permutation test and the sign test's binomial."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import binomtest, permutation_test

from retrieval_bench.evaluation.stats import (
    EPS,
    EXACT_MAX_NONZERO,
    MC_PERMUTATIONS,
    _test_seed,
    kendall_tau,
    randomization_p_value,
    sign_flip_p_value,
    tau_ap,
)


def _strict_tau_ap(order: list[int], truth: list[int], tied_in_both: set[tuple[int, int]]) -> float:
    """The definition (Yilmaz et al. 2008) for a strict estimated `order` and a strict `truth`
    (both best first): 2 / (N - 1) sum_i C(i) / (i - 1) - 1; a pair both orderings tie agrees."""
    n, rank = len(order), {system: position for position, system in enumerate(truth)}
    total = sum(
        sum(rank[u] < rank[order[i]] or (u, order[i]) in tied_in_both for u in order[:i]) / i for i in range(1, n)
    )
    return 2 * total / (n - 1) - 1


def _tie_orders(scores: list[float]) -> list[list[int]]:
    """Every strict order (best first) that breaks the ties of `scores`."""
    groups = [[i for i, s in enumerate(scores) if s == value] for value in sorted(set(scores), reverse=True)]
    return [[i for part in parts for i in part] for parts in itertools.product(*map(itertools.permutations, groups))]


def _mean_over_tie_orders(estimated: list[float], actual: list[float]) -> float:
    """The mean of the definition over every order of the ties of both orderings."""
    tied_in_both = {
        (u, v)
        for u, v in itertools.permutations(range(len(actual)), 2)
        if estimated[u] == estimated[v] and actual[u] == actual[v]
    }
    values = [
        _strict_tau_ap(order, truth, tied_in_both) for order in _tie_orders(estimated) for truth in _tie_orders(actual)
    ]
    return sum(values) / len(values)


def test_tau_ap_is_the_mean_over_every_order_of_the_tied_systems():
    rng = np.random.default_rng(30)
    checked = 0
    while checked < 200:
        n = int(rng.integers(3, 8))
        estimated = rng.integers(0, int(rng.integers(2, n + 1)), n).astype(float).tolist()
        actual = rng.integers(0, int(rng.integers(2, n + 2)), n).astype(float).tolist()
        orders = math.prod(math.factorial(estimated.count(v)) for v in set(estimated)) * math.prod(
            math.factorial(actual.count(v)) for v in set(actual)
        )
        if len(set(estimated)) < 2 or len(set(actual)) < 2 or orders > 3000:  # NaN by definition / too slow
            continue
        assert tau_ap(estimated, actual) == pytest.approx(_mean_over_tie_orders(estimated, actual), abs=1e-12)
        listed = rng.permutation(n)  # the order systems are listed in changes nothing
        assert tau_ap(np.array(estimated)[listed], np.array(actual)[listed]) == pytest.approx(
            tau_ap(estimated, actual), abs=1e-12
        )
        checked += 1


def test_tau_ap_of_an_ordering_with_ties_against_itself_is_one():
    for scores in ([2, 1, 1], [3, 3, 2, 2, 1], [0.5, 0.5, 0.5, 0.2]):
        assert tau_ap(scores, scores) == pytest.approx(1.0, abs=1e-12)


def test_tau_ap_of_issue_30s_tie_is_zero_whichever_system_is_listed_first():
    """bm25 0.718, bm25-raw 0.692, hybrid 0.692 against 0.75, 0.675, 0.85: the two orders of the tie
    give +1 ... -1 halves that average to 0 (the old 1/2-per-pair rule gave +0.25 or -0.25)."""
    assert tau_ap([0.718, 0.692, 0.692], [0.75, 0.675, 0.85]) == pytest.approx(0.0, abs=1e-12)
    assert tau_ap([0.718, 0.692, 0.692], [0.75, 0.85, 0.675]) == pytest.approx(0.0, abs=1e-12)


def _hand_tau_b(x: list[float], y: list[float]) -> float:
    """Kendall's tau-b by counting pairs: (concordant - discordant) / sqrt((n0 - tied x)(n0 - tied y))."""
    concordant = discordant = tied_x = tied_y = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        dx, dy = x[i] - x[j], y[i] - y[j]
        tied_x += dx == 0
        tied_y += dy == 0
        concordant += dx * dy > 0
        discordant += dx * dy < 0
    pairs = len(x) * (len(x) - 1) // 2
    return (concordant - discordant) / math.sqrt((pairs - tied_x) * (pairs - tied_y))


HAND_CASES = [
    ([0.3, 0.5, 0.1, 0.9], [0.2, 0.6, 0.3, 0.8]),
    ([1, 2, 3, 4, 5], [5, 4, 3, 2, 1]),
    ([1, 2, 2, 3, 4], [1, 3, 2, 2, 5]),  # ties in both
    ([3, 1, 1, 3, 3, 3, 1], [0, 0, 0, 3, 1, 0, 1]),
]


def test_kendall_tau_is_tau_b_counted_by_hand():
    rng = np.random.default_rng(8)
    random_cases = [
        (rng.integers(0, 4, n).astype(float).tolist(), rng.integers(0, 4, n).astype(float).tolist())
        for n in rng.integers(2, 12, 100)
    ]
    checked = 0
    for x, y in HAND_CASES + random_cases:
        if len(set(x)) < 2 or len(set(y)) < 2:
            assert math.isnan(kendall_tau(x, y))
            continue
        assert kendall_tau(x, y) == pytest.approx(_hand_tau_b(x, y), abs=1e-12)
        checked += 1
    assert checked >= 80


def _enumerated_p(diffs: list[int]) -> float:
    """The sign-flip p-value in plain Python over every flip, in exact integer arithmetic."""
    observed = abs(sum(diffs))
    count = sum(
        abs(sum(sign * d for sign, d in zip(signs, diffs))) >= observed
        for signs in itertools.product((1, -1), repeat=len(diffs))
    )
    return count / 2 ** len(diffs)


def test_p_values_are_exact_with_ties_in_the_differences():
    """Small integers / 10: many flips reach the observed |mean| exactly (ties), which floating
    point sums in another order must still count; zero differences change nothing."""
    rng = np.random.default_rng(11)
    for _ in range(150):
        ints = rng.integers(-3, 4, int(rng.integers(1, 13))).tolist()
        expected = 1.0 if not any(ints) else _enumerated_p(ints)
        assert randomization_p_value(np.array(ints) / 10) == expected, ints


def test_p_values_equal_scipys_exact_paired_permutation_test():
    rng = np.random.default_rng(12)
    for n in range(2, 14):
        a, b = rng.uniform(0, 1, n), rng.uniform(0, 1, n)
        scipy_p = permutation_test(
            (b, a), lambda x, y: np.mean(x - y), permutation_type="samples", n_resamples=np.inf
        ).pvalue
        assert randomization_p_value(b - a) == pytest.approx(scipy_p, abs=1e-12)


@pytest.mark.parametrize("wins", [14, 15, 16, 17, 20])
def test_twenty_equal_differences_are_the_exact_sign_test(wins):
    """|d| all equal: the flips' sums count signs, so p is the two-sided binomial p of the wins;
    zero differences around them (questions both runs score alike) leave it exact."""
    diffs = np.array([0.25] * wins + [-0.25] * (EXACT_MAX_NONZERO - wins) + [0.0] * 35)
    assert randomization_p_value(diffs) == pytest.approx(binomtest(wins, EXACT_MAX_NONZERO).pvalue, abs=1e-12)
    near_zero = np.concatenate([diffs, [0.3 - 0.1 - 0.2, 1e-13]])  # float noise is a tie, not a 22nd difference
    assert randomization_p_value(near_zero) == randomization_p_value(diffs)


def test_beyond_twenty_each_test_draws_its_own_flips_with_a_small_standard_error():
    """30 equal differences, 21 of them wins: exact p = binomial 0.0428. Each of 40 tests (the same
    signs in other places, other scales) draws its own flips: their errors differ and stay within
    the standard error of MC_PERMUTATIONS draws, which is at most 0.002 at p = 0.05."""
    exact = binomtest(21, 30).pvalue
    assert math.sqrt(0.05 * 0.95 / MC_PERMUTATIONS) <= 0.002
    rng = np.random.default_rng(13)
    base = np.array([1.0] * 21 + [-1.0] * 9)
    estimates = np.array([randomization_p_value(rng.permutation(base) * rng.uniform(0.1, 1)) for _ in range(40)])
    assert len(set(estimates)) >= 35  # a sign matrix shared by tests of one size gives scaled copies one p
    assert randomization_p_value(base) != randomization_p_value(base * 2)
    standard_error = math.sqrt(exact * (1 - exact) / MC_PERMUTATIONS)
    assert np.sqrt(np.mean((estimates - exact) ** 2)) <= 1.3 * standard_error
    assert np.all(np.abs(estimates - exact) <= 4 * standard_error)


def test_fewer_permutations_asked_still_draw_enough():
    exact = binomtest(21, 30).pvalue
    base = np.array([1.0] * 21 + [-1.0] * 9)
    assert abs(randomization_p_value(base, permutations=100) - exact) <= 4 * math.sqrt(exact * (1 - exact) / 12_000)


def test_drawn_flips_count_as_the_plain_sums_of_their_flipped_differences():
    """Beyond 20 nonzero differences, p against each drawn flip summed one difference at a time:
    the test's own bytes (its seed), bit i of byte j (most significant first) flipping nonzero
    difference 8j + i. Quarters: every sum is exact, so any order of summing counts alike."""
    rng = np.random.default_rng(15)
    for n, draws, seed in ((24, 500, 0), (61, 3_000, 1), (150, MC_PERMUTATIONS, 2)):
        diffs = rng.choice([-1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75], n)
        nonzero = diffs[diffs != 0]
        assert len(nonzero) > EXACT_MAX_NONZERO
        drawn = np.random.default_rng(_test_seed(diffs, seed)).integers(
            0, 256, (draws, -(-len(nonzero) // 8)), dtype=np.uint8
        )
        flipped = np.unpackbits(drawn, axis=1)[:, : len(nonzero)].astype(bool)
        sums = np.where(flipped, -nonzero, nonzero).sum(axis=1)
        count = np.count_nonzero(np.abs(sums) >= n * (abs(diffs.mean()) - EPS))
        assert sign_flip_p_value(diffs, draws, seed) == (count + 1) / (draws + 1)
