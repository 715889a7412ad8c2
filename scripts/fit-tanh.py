#!/usr/bin/env python3
"""Fits the rational tanh of fused/src/kernels/mod.rs (TANH_P, TANH_Q).

tanh(x) ~ x P(x^2) / Q(x^2) on [0, LIMIT], P and Q of degree 4 in x^2 with
P(0) = Q(0) = 1, by Lawson's iteratively reweighted least squares on the
linearised error x P - tanh(x) Q (weights divided by the last Q, and grown
where the error is largest), in the scaled variable (x / LIMIT)^2 for
conditioning. Prints the coefficients (highest power first, as f32) and the
worst error of the f32 evaluation with fused multiply-adds, emulated in f64.
Needs numpy (the tools venv has it): .venv-tools/bin/python scripts/fit-tanh.py
"""
import numpy as np

LIMIT, DEG = 8.0, 4


def fit(iters=400):
    x = np.unique(np.concatenate([np.linspace(0, LIMIT, 40000),
                                  LIMIT * np.sin(np.linspace(0, np.pi / 2, 8000)) ** 2]))
    t, s = np.tanh(x), (x / LIMIT) ** 2
    powers = s[:, None] ** np.arange(1, DEG + 1)
    a = np.hstack([x[:, None] * powers, -t[:, None] * powers])
    w, q, best = np.ones_like(x), np.ones_like(x), None
    for _ in range(iters):
        c, *_ = np.linalg.lstsq(a * (w / q)[:, None], (t - x) * w / q, rcond=None)
        p, qq = np.concatenate([[1], c[:DEG]]), np.concatenate([[1], c[DEG:]])
        q = np.polyval(qq[::-1], s)
        err = np.abs(x * np.polyval(p[::-1], s) / q - t)
        if best is None or err.max() < best[0]:
            best = (err.max(), p, qq)
        w = w * (err / err.max() + 1e-4)
        w /= w.max()
    m, p, qq = best
    scale = LIMIT ** (2 * np.arange(DEG + 1))
    return m, (p / scale).astype(np.float32), (qq / scale).astype(np.float32)


def tanh32(x, p, q):
    """The kernel's arithmetic: each Horner step one rounding (an FMA)."""
    a = np.abs(x)
    u = (a * a).astype(np.float32)
    r = ((a * _horner(p, u)).astype(np.float32) / _horner(q, u)).astype(np.float32)
    return np.copysign(np.where(a >= LIMIT, np.float32(1), r), x)


def _horner(cs, u):
    acc = np.full_like(u, cs[-1])
    for c in cs[-2::-1]:
        acc = (acc.astype(np.float64) * u + np.float64(c)).astype(np.float32)
    return acc


m, p, q = fit()
with np.errstate(over="ignore", invalid="ignore"):
    xs = np.unique(np.concatenate([np.arange(-20 * 4096, 20 * 4096 + 1) / 4096.0,
                                   np.linspace(0, 9, 2000001)])).astype(np.float32)
    worst = np.abs(tanh32(xs, p, q).astype(np.float64) - np.tanh(xs.astype(np.float64))).max()
print("fit error (f64): %.2e; f32 evaluation, worst: %.3e" % (m, worst))
print("TANH_P (highest first):", ", ".join(np.format_float_scientific(v, unique=True) for v in p[::-1]))
print("TANH_Q (highest first):", ", ".join(np.format_float_scientific(v, unique=True) for v in q[::-1]))
