"""1-D linear finite elements for -u'' = f (the first version: runs, but is wrong)."""

import numpy as np

GAUSS_XI = np.array([-1.0, 1.0]) / np.sqrt(3.0)


class FEMResult:
    def __init__(self, nodes, u):
        self.nodes = nodes
        self.u = u


def element_stiffness(h):
    return (1.0 / h) * np.array([[1.0, -1.0], [-1.0, 1.0]])


def element_load(f, h, a):
    xg = 0.5 * h * (1.0 + GAUSS_XI)  # bug: the element's left end a is missing
    phi0 = 0.5 * (1.0 - GAUSS_XI)
    phi1 = 0.5 * (1.0 + GAUSS_XI)
    fx = np.array([float(f(x)) for x in xg])
    return 0.5 * h * np.array([np.sum(fx * phi0), np.sum(fx * phi1)])


def solve_1d_poisson(f, n_elems, domain=(0.0, 1.0), bc=(0.0, 0.0), solver=None):
    a, b = domain
    n = int(n_elems) + 1
    nodes = np.linspace(a, b, n)
    K = np.zeros((n, n))
    F = np.zeros(n)
    for e in range(n - 1):
        h = nodes[e + 1] - nodes[e]
        K[e : e + 2, e : e + 2] += element_stiffness(h)
        F[e : e + 2] += element_load(f, h, nodes[e])
    for idx, value in ((0, bc[0]), (n - 1, bc[1])):
        K[idx, :] = 0.0
        K[:, idx] = 0.0  # bug: the column is cleared before its value is moved to F
        K[idx, idx] = 1.0
        F[idx] = value
    u = solver(K, F) if solver is not None else np.linalg.solve(K, F)
    return FEMResult(nodes, u)


def compute_errors(result, exact, n_samples=2001):
    x = np.linspace(result.nodes[0], result.nodes[-1], n_samples)
    err = np.interp(x, result.nodes, result.u) - exact(x)
    return float(np.sqrt(np.trapz(err**2, x))), float(np.max(np.abs(err)))
