"""Multiple-comparison corrections of p-values: Holm (family-wise error) and Benjamini-Hochberg
(false discovery rate). Pure functions; adjusted p-values, so that "adjusted p < alpha" is the
corrected test at level alpha (as statsmodels' multipletests reports them)."""

from __future__ import annotations

import numpy as np
from scipy import stats

HOLM = "Holm (family-wise error rate)"
BH = "Benjamini-Hochberg (false discovery rate)"


def holm_adjust(p_values) -> np.ndarray:
    """Holm's step-down adjusted p-values: the i-th smallest of m is multiplied by (m - i + 1),
    made non-decreasing in that order, and capped at 1 (Holm 1979)."""
    p = np.asarray(p_values, dtype=np.float64)
    m = len(p)
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(p[order] * (m - np.arange(m)))
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted


def bh_adjust(p_values) -> np.ndarray:
    """Benjamini-Hochberg step-up adjusted p-values (Benjamini & Hochberg 1995), as
    scipy.stats.false_discovery_control computes them; none for no p-value."""
    p = np.asarray(p_values, dtype=np.float64)
    return p.copy() if len(p) == 0 else stats.false_discovery_control(p, method="bh")
