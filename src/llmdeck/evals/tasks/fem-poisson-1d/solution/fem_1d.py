"""1-D linear finite elements for -u'' = f on (a, b) with Dirichlet boundary values."""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

GAUSS_XI = np.array([-1.0, 1.0]) / np.sqrt(3.0)
GAUSS_W = np.array([1.0, 1.0])


@dataclass
class FEMResult:
    nodes: np.ndarray
    u: np.ndarray
    h: float

    def evaluate(self, x: np.ndarray) -> np.ndarray:
        return np.interp(x, self.nodes, self.u)


def element_stiffness(h: float) -> np.ndarray:
    return (1.0 / h) * np.array([[1.0, -1.0], [-1.0, 1.0]])


def element_load(f, h: float, a: float) -> np.ndarray:
    xg = a + 0.5 * h * (1.0 + GAUSS_XI)
    phi0 = 0.5 * (1.0 - GAUSS_XI)
    phi1 = 0.5 * (1.0 + GAUSS_XI)
    fx = np.array([float(f(x)) for x in xg])
    return 0.5 * h * np.array([np.sum(GAUSS_W * fx * phi0), np.sum(GAUSS_W * fx * phi1)])


def _check(n_elems, domain) -> tuple[float, float]:
    if isinstance(n_elems, bool) or not isinstance(n_elems, numbers.Integral) or n_elems < 1:
        raise ValueError(f"n_elems must be a positive integer, got {n_elems!r}")
    a, b = float(domain[0]), float(domain[1])
    if not a < b:
        raise ValueError(f"domain must have a < b, got {domain!r}")
    return a, b


def assemble(nodes: np.ndarray, f) -> tuple[np.ndarray, np.ndarray]:
    n = len(nodes)
    K = np.zeros((n, n))
    F = np.zeros(n)
    for e in range(n - 1):
        h = nodes[e + 1] - nodes[e]
        idx = [e, e + 1]
        K[np.ix_(idx, idx)] += element_stiffness(h)
        F[idx] += element_load(f, h, nodes[e])
    return K, F


def apply_bc(K: np.ndarray, F: np.ndarray, bcs: dict[int, float]) -> None:
    for idx, value in bcs.items():
        F -= K[:, idx] * value
        K[idx, :] = 0.0
        K[:, idx] = 0.0
        K[idx, idx] = 1.0
    for idx, value in bcs.items():
        F[idx] = value


def solve_1d_poisson(f, n_elems, domain=(0.0, 1.0), bc=(0.0, 0.0), solver=None) -> FEMResult:
    a, b = _check(n_elems, domain)
    nodes = np.linspace(a, b, int(n_elems) + 1)
    K, F = assemble(nodes, f)
    apply_bc(K, F, {0: float(bc[0]), len(nodes) - 1: float(bc[1])})
    u = solver(K, F) if solver is not None else np.linalg.solve(K, F)
    return FEMResult(nodes=nodes, u=np.asarray(u, dtype=float), h=(b - a) / int(n_elems))


def compute_errors(result: FEMResult, exact, n_samples: int = 2001) -> tuple[float, float]:
    x = np.linspace(result.nodes[0], result.nodes[-1], n_samples)
    err = result.evaluate(x) - np.array([float(exact(t)) for t in x])
    l2 = float(np.sqrt(np.trapezoid(err**2, x)))
    return l2, float(np.max(np.abs(err)))


if __name__ == "__main__":
    prev = None
    print(f"{'N':>5} {'L2 error':>12} {'rate':>6}")
    for n in (4, 8, 16, 32, 64, 128):
        res = solve_1d_poisson(lambda x: np.pi**2 * np.sin(np.pi * x), n)
        l2, linf = compute_errors(res, lambda x: np.sin(np.pi * x))
        rate = "--" if prev is None else f"{np.log2(prev / l2):.2f}"
        print(f"{n:>5} {l2:12.3e} {rate:>6}")
        prev = l2
