"""Prediction-powered inference (PPI++): a mean over the golden set from a few questions a person
reviewed and the model's figure on every question, with a 95% interval that stays valid however
wrong the model is (Angelopoulos, Duchi and Zrnic 2023, "PPI++: Efficient Prediction-Powered
Inference", the mean with the power-tuned lambda; Angelopoulos et al., Science 2023).

The reviewed questions are the labelled sample (n): each has its human truth Y (the metric with the
reviewers' grades), whether a reviewer kept it (K = 1 for fine, 0 rejected) and the model's figure f
(the metric with the judge's grades and every question kept). The unreviewed rest (N) has f alone.
The estimand is the mean of Y over the questions a reviewer would keep, E[K Y] / E[K]; with no
rejection it is PPI++'s mean. It solves the PPI++ estimating equation of the gradient K (Y - theta),
whose model twin is f - theta (the model keeps every question):

    lambda mean_N(f - theta) + mean_n(K (Y - theta) - lambda (f - theta)) = 0
    theta = (mean_n(K Y) + lambda (mean_N(f) - mean_n(f))) / mean_n(K)

lambda = 0 is the human-only (classical) estimate, lambda = 1 plain PPI; the power-tuned lambda
minimises the variance: Cov_n(g, g_f) / ((1 + n/N) Var(g_f)), clipped to [0, 1], with g = K (Y -
theta0), g_f = f - theta0 at the classical theta0 (the variance of g_f over all n + N questions,
as ppi_py does). The variance is the sandwich of the linearised equation, H = mean_n(K):

    Var(theta) = (Var_n(g - lambda g_f) / n + lambda^2 Var_N(g_f) / N) / H^2

and the interval theta +- 1.96 sd (normal). It assumes the reviewed questions are a uniformly random
sample of the golden set: a reviewer who picks questions (or reviews beyond the drawn sample) breaks
it, and the interval then covers nothing in particular. A paired delta of two systems is the same
estimator on per-question differences (Y_A - Y_B, f_A - f_B, the same K)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

Z95 = 1.959963984540054  # the normal's 97.5% quantile: a two-sided 95% interval
MIN_LABELLED = 2  # a variance needs two reviewed questions


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

    def p_value(self) -> float:
        """The two-sided normal test of a zero mean (a delta of no difference): erfc(|z| / sqrt 2)."""
        sd = (self.high - self.low) / (2 * Z95)
        if sd <= 0:
            return 1.0 if self.estimate == 0 else 0.0
        return math.erfc(abs(self.estimate) / sd / math.sqrt(2))

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
) -> Estimate | None:
    """The PPI++ estimate of E[K Y] / E[K] (module docstring): `y`, `f_labelled` and `keep` (1 kept,
    0 rejected; all kept when None) on the reviewed questions, `f_unlabelled` on the rest; `lam`
    None tunes it, 0 gives the human-only interval. None with fewer than 2 reviewed questions, no
    kept one, or no unreviewed one while lam is not 0."""
    y, f_lab, f_unl = (np.asarray(a, dtype=np.float64) for a in (y, f_labelled, f_unlabelled))
    k = np.ones_like(y) if keep is None else np.asarray(keep, dtype=np.float64)
    n, big_n = len(y), len(f_unl)
    if n < MIN_LABELLED or k.sum() == 0 or (big_n == 0 and lam != 0):
        return None
    kbar = float(k.mean())
    if lam is None:
        theta0 = float((k * y).mean()) / kbar
        grad, grad_f = k * (y - theta0), f_lab - theta0
        spread = float(np.var(np.concatenate([f_lab, f_unl]), ddof=1))
        covariance = float(np.mean((grad - grad.mean()) * (grad_f - grad_f.mean())))
        lam = 0.0 if spread <= 0 else float(np.clip(covariance / ((1 + n / big_n) * spread), 0.0, 1.0))
    shift = lam * (float(f_unl.mean()) - float(f_lab.mean())) if big_n else 0.0
    theta = (float((k * y).mean()) + shift) / kbar
    rectifier = k * (y - theta) - lam * (f_lab - theta)
    variance = float(np.var(rectifier)) / n + (lam**2 * float(np.var(f_unl)) / big_n if big_n else 0.0)
    sd = math.sqrt(max(variance, 0.0)) / kbar
    return Estimate(theta, theta - Z95 * sd, theta + Z95 * sd, float(lam), n, int(k.sum()), big_n)


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
    return ppi_mean(delta_y, delta_f[mask], delta_f[~mask], reviewed.keep, lam)
