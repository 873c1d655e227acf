"""Prediction-powered inference (PPI++): a mean over the golden set from a few questions a person
reviewed and the model's figure on every question, with a 95% interval that stays valid however
wrong the model is (Angelopoulos, Duchi and Zrnic 2023, "PPI++: Efficient Prediction-Powered
Inference", the mean with the power-tuned lambda; Angelopoulos et al., Science 2023), made honest
for a few dozen reviewed questions by a cross-fitted lambda, the jackknife and Student's t.

The reviewed questions are the labelled sample (n): each has its human truth Y (the metric with the
reviewers' grades), whether a reviewer kept it (K = 1 for fine, 0 rejected) and the model's figure f
(the metric with the judge's grades and every question kept). The unreviewed rest (N) has f alone.
The estimand is the mean of Y over the questions a reviewer would keep, E[K Y] / E[K]; with no
rejection it is PPI++'s mean. It solves the PPI++ estimating equation of the gradient K (Y - theta),
whose model twin is f - theta (the model keeps every question), with reviewed question i's own
lambda_i:

    mean_n(K_i (Y_i - theta) - lambda_i (f_i - theta)) + mean_n(lambda_i) mean_N(f - theta) = 0
    theta = (mean_n(K Y) + mean_n(lambda_i (mean_N(f) - f_i))) / mean_n(K)

lambda = 0 is the human-only (classical) estimate, lambda = 1 plain PPI; the human-only interval of a
0/1 figure is the share's exact (Clopper-Pearson) one. The power-tuned lambda of a
set S of reviewed questions minimises the variance: Cov_S(g, g_f) / ((1 + |S|/N) Var(g_f)), clipped
to [0, 1], with g = K (Y - theta0), g_f = f - theta0 at S's classical theta0 = sum_S(K Y) / sum_S(K)
(Cov_S over S, ddof 0; Var over S and the N unreviewed questions, ddof 1, as ppi_py does; lambda 0
where S has no kept question or f does not vary). Tuned, lambda_i is the lambda of the other n - 1
reviewed questions (cross-fitted, leave one out): the lambda of all n, PPI++'s plug-in, is tuned to
the very questions it corrects and on a few dozen of them fits their noise, biasing the estimate
and narrowing the interval. A given lambda is every lambda_i.

The variance is the jackknife's over the reviewed questions plus the unreviewed mean's (Var_N ddof 0):

    Var(theta) = (n - 1) / n sum_j (theta_(-j) - mean_j theta_(-j))^2
                 + (mean_n(lambda_i) / mean_n(K))^2 Var_N(f) / N

where theta_(-j) is the estimate without reviewed question j, its lambdas tuned again on what is
left (each lambda_i then of the n - 2 others): unlike the sandwich it counts how lambda and the
ratio move with the sample. With lambda 0 and nothing rejected it is Var_n(Y) / n (ddof 1), the
classical one. The interval is theta +- t sd, t the 97.5% quantile of Student's t with n - 1
degrees of freedom (the classical small-sample interval; within 1% of the normal's 1.96 from 125
on). The three corrections and what each buys: bench/ppi_coverage.py --ablation. It assumes
the reviewed questions are a uniformly random sample of the golden set: a reviewer who picks
questions (or reviews beyond the drawn sample) breaks it, and the interval then covers nothing in
particular. A paired delta of two systems is the same estimator on per-question differences
(Y_A - Y_B, f_A - f_B, the same K)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import special  # t's quantile and tail, as scipy.stats computes them, without its import

MIN_LABELLED = 2  # a variance needs two reviewed questions, the jackknife two kept ones
LAMBDAS_AT_ONCE = 250_000  # the jackknife tunes this many lambdas in one array (7 sums each: 14 MB)


def t95(n_reviewed: int) -> float:
    """The 97.5% quantile of Student's t with n_reviewed - 1 degrees of freedom: a two-sided 95%
    interval's half-width in standard deviations."""
    return float(special.stdtrit(n_reviewed - 1, 0.975))


@dataclass(frozen=True)
class Estimate:
    """A PPI estimate, its 95% interval, the lambda used and how many questions fed it."""

    estimate: float
    low: float
    high: float
    lam: float
    n_reviewed: int
    n_kept: int
    n_unreviewed: int
    sd: float  # the estimate's standard deviation: the interval's half-width towards 0 before it is kept in range, / t

    def p_value(self) -> float:
        """The two-sided test of a zero mean (a delta of no difference) the interval inverts:
        Student's t with n_reviewed - 1 degrees of freedom."""
        if self.sd <= 0:  # every figure 0 at the end of the range towards 0: no evidence of a difference
            return 1.0
        return float(2 * special.stdtr(self.n_reviewed - 1, -abs(self.estimate) / self.sd))

    def to_dict(self, digits: int = 4) -> dict:
        return {key: round(value, digits) if isinstance(value, float) else value for key, value in asdict(self).items()}


@dataclass(frozen=True)
class ReviewSample:
    """Which questions people reviewed (`mask`, over every question) and, in their order, which
    they kept (`keep`: 1 fine, 0 rejected; None: all kept)."""

    mask: np.ndarray
    keep: np.ndarray | None = None


def ppi_mean(
    y: np.ndarray,
    f_labelled: np.ndarray,
    f_unlabelled: np.ndarray,
    keep: np.ndarray | None = None,
    lam: float | None = None,
    bounds: tuple[float, float] = (0.0, 1.0),
) -> Estimate | None:
    """The PPI++ estimate of E[K Y] / E[K] (module docstring): `y`, `f_labelled` and `keep` (1 kept,
    0 rejected; all kept when None) on the reviewed questions, `f_unlabelled` on the rest; `lam`
    None tunes it (cross-fitted), 0 gives the human-only interval; `bounds` the range of Y (every
    metric reviewed is in [0, 1], a delta of two in [-1, 1]): the interval is kept in it, and an
    estimate without spread (degenerate_half_widths) gets the range's distribution-free bound.
    None with fewer than 2 reviewed or kept questions; with no unreviewed one, the people-only
    estimate (lam 0: the tuned lambda's (1 + n/N) factor is infinite).
    `lam` in the result is the mean of the lambda_i."""
    y, f_lab, f_unl = (np.asarray(a, dtype=np.float64) for a in (y, f_labelled, f_unlabelled))
    k = np.ones_like(y) if keep is None else np.asarray(keep, dtype=np.float64)
    n, big_n = len(y), len(f_unl)
    if n < MIN_LABELLED or k.sum() < MIN_LABELLED:
        return None
    if big_n == 0:  # every question reviewed: no model figure to correct, PPI is the people's own estimate
        lam = 0.0
    if lam == 0 and bounds == (0.0, 1.0) and np.isin(y[k > 0], (0.0, 1.0)).all():
        return _share_interval(int((k * y).sum()), int(k.sum()), n, big_n)
    # lambda and theta see f only through differences: centring it keeps the sums' variances exact
    centre = float(np.concatenate([f_lab, f_unl]).mean())
    f_lab, f_unl = f_lab - centre, f_unl - centre
    parts = np.stack([np.ones(n), k, k * y, f_lab, k * y * f_lab, k * f_lab, f_lab * f_lab], axis=1)
    unl = (big_n, float(f_unl.sum()), float((f_unl * f_unl).sum()))
    gap = (float(f_unl.mean()) if big_n else 0.0) - f_lab  # mean_N(f) - f_i
    if lam is None:
        lams = _tuned(parts.sum(axis=0) - parts, unl)
    else:
        lams = np.full(n, float(lam))
    theta = (float((k * y).sum()) + float((lams * gap).sum())) / float(k.sum())
    without = np.concatenate([_without(j, parts, unl, gap, lam) for j in _chunks(n)])
    kbar, lam_bar = float(k.mean()), float(lams.mean())
    variance = (n - 1) / n * float(((without - without.mean()) ** 2).sum())
    variance += (lam_bar / kbar) ** 2 * float(np.var(f_unl)) / big_n if big_n else 0.0
    half_low = half_high = t95(n) * math.sqrt(max(variance, 0.0))
    if half_low <= 1e-12 * max(1.0, abs(theta)):
        half_low, half_high = degenerate_half_widths(theta, int(k.sum()), bounds)
    sd = (half_low if theta >= 0 else half_high) / t95(n)  # the side towards 0: what p_value tests
    # in range, the estimate too (PPI++ can step past an end: 1.152 of a metric in [0, 1]), and
    # never outside its own interval
    inside = min(max(theta, bounds[0]), bounds[1])
    low = min(max(theta - half_low, bounds[0]), inside)
    high = max(min(theta + half_high, bounds[1]), inside)
    return Estimate(inside, low, high, lam_bar, n, int(k.sum()), big_n, sd)


def degenerate_half_widths(value: float, n_kept: int, bounds: tuple[float, float]) -> tuple[float, float]:
    """(below, above) half-widths of a 95% interval for the mean of a variable in `bounds` when all
    n_kept reviewed values were `value` (a t interval has no width then: 25 reviewed recall@10s of 1
    said [1.000, 1.000] where the mean was 0.95). The share q of questions at `value` is at least
    0.05^(1/n) with 95% confidence (Clopper-Pearson's one-sided bound after n alike; one event
    bounds both ends), and the rest lie somewhere in `bounds`: the mean is within (1 - q) of the
    way to either end."""
    lowest, highest = bounds
    elsewhere = 1.0 - 0.05 ** (1.0 / n_kept)
    return (value - lowest) * elsewhere, (highest - value) * elsewhere


def _share_interval(hits: int, n_kept: int, n_reviewed: int, n_unreviewed: int) -> Estimate:
    """The people-only estimate of a 0/1 figure (a hit, recall@k of one passage): the share of the
    kept reviewed questions with Clopper-Pearson's exact 95% interval, which covers at least 95% at
    any share. The t interval of a share covered 87.5% at a share of 0.9 from 50 reviewed and
    88.8% at 0.8 from 25 (bench/ppi_coverage.py --binary)."""
    share = hits / n_kept
    low = float(special.betaincinv(hits, n_kept - hits + 1, 0.025)) if hits > 0 else 0.0
    high = float(special.betaincinv(hits + 1, n_kept - hits, 0.975)) if hits < n_kept else 1.0
    return Estimate(share, low, high, 0.0, n_reviewed, n_kept, n_unreviewed, (share - low) / t95(n_reviewed))


def _tuned(sums: np.ndarray, unl: tuple[int, float, float]) -> np.ndarray:
    """The power-tuned lambda of each set of reviewed questions whose sums (of 1, K, K Y, f, K Y f,
    K f, f^2, f centred) lie on the last axis, with the unreviewed questions' (N, sum f, sum f^2)."""
    m, sk, sky, sf, skyf, skf, sff = np.moveaxis(sums, -1, 0)
    big_n, unl_sum, unl_squares = unl
    total = m + big_n
    with np.errstate(divide="ignore", invalid="ignore"):
        theta0 = sky / sk
        fbar = sf / m
        covariance = (skyf / m - sky / m * fbar) - theta0 * (skf / m - sk / m * fbar)
        spread = (sff + unl_squares - (sf + unl_sum) ** 2 / total) / (total - 1)
        lam = np.clip(covariance / ((1 + m / big_n) * spread), 0.0, 1.0)
    # no kept question, or f constant up to rounding (its sums cancel to ~1e-16 of its squares)
    flat = spread <= 1e-12 * (sff + unl_squares) / total
    return np.where((sk > 0) & (m > 0) & ~flat & np.isfinite(lam), lam, 0.0)


def _chunks(n: int) -> list[np.ndarray]:
    """The left-out questions j in groups whose n^2 lambdas fit in LAMBDAS_AT_ONCE."""
    rows = max(1, LAMBDAS_AT_ONCE // max(n, 1))
    return [np.arange(start, min(start + rows, n)) for start in range(0, n, rows)]


def _without(
    left_out: np.ndarray, parts: np.ndarray, unl: tuple[int, float, float], gap: np.ndarray, lam: float | None
) -> np.ndarray:
    """theta_(-j) for each j in left_out: the estimate without reviewed question j, each remaining
    lambda_i tuned on the others but i and j (or the given lam)."""
    n = len(parts)
    present = np.ones((len(left_out), n))
    present[np.arange(len(left_out)), left_out] = 0.0
    if lam is None:
        rest = parts.sum(axis=0) - parts[left_out]  # (rows, 7): the sums without j
        lams = _tuned(rest[:, None, :] - parts[None, :, :], unl)  # (rows, n): lambda of the rest but i
    else:
        lams = np.full((len(left_out), n), float(lam))
    k, ky = parts[:, 1], parts[:, 2]
    return (present @ ky + (present * lams) @ gap) / (present @ k)


def ppi_paired(
    y_a: np.ndarray,
    y_b: np.ndarray,
    f_a: np.ndarray,
    f_b: np.ndarray,
    reviewed: ReviewSample,
    *,
    lam: float | None = None,
) -> Estimate | None:
    """The PPI interval of the mean delta B - A over the same questions: ppi_mean of the per-question
    differences. `y_*` on the reviewed questions (in reviewed.mask order), `f_*` on every question."""
    mask = np.asarray(reviewed.mask, dtype=bool)
    delta_f = np.asarray(f_b, dtype=np.float64) - np.asarray(f_a, dtype=np.float64)
    delta_y = np.asarray(y_b, dtype=np.float64) - np.asarray(y_a, dtype=np.float64)
    return ppi_mean(delta_y, delta_f[mask], delta_f[~mask], reviewed.keep, lam, bounds=(-1.0, 1.0))
