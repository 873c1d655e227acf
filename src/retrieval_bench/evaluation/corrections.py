"""Multiple-comparison corrections of p-values: Holm (family-wise error) and Benjamini-Hochberg
(false discovery rate). Pure functions; adjusted p-values, so that "adjusted p < alpha" is the
corrected test at level alpha (as statsmodels' multipletests reports them)."""

from __future__ import annotations

import numpy as np

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
    """Benjamini-Hochberg step-up adjusted p-values: the i-th smallest of m is multiplied by m / i,
    made non-increasing from the largest down, and capped at 1 (Benjamini & Hochberg 1995)."""
    p = np.asarray(p_values, dtype=np.float64)
    m = len(p)
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    stepped = np.minimum.accumulate(scaled[::-1])[::-1]
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted
