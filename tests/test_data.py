"""Tests of the finite-d data generator (attnlib.finite_d.data, book eqs. (eq-tokens), (eq-teacher))."""
import math

import numpy as np
import pytest

from attnlib.finite_d.data import (check_A, iter_sample_chunks, make_task, make_teacher,
                          positional_encodings, seed_streams, softmax_rows, teacher_attention)
from attnlib.params import TaskParams

P = TaskParams(sigma=0.5, lam=0.01, omega=0.3)


def test_positional_encodings_l2_and_general():
    d = 8
    E = positional_encodings(d, 2)
    assert np.allclose(E[0], 1 / math.sqrt(d)) and np.allclose(E[1], -1 / math.sqrt(d))
    E4 = positional_encodings(d, 4)
    # L > 2: the vertices of the regular simplex (unit norm, p_l . p_k = -1/(L-1), summing to zero)
    assert np.allclose(E4 @ E4.T, (4 / 3) * (np.eye(4) - 0.25)) and np.allclose(E4.sum(axis=0), 0.0)
    with pytest.raises(ValueError, match="d must be >= L"):
        positional_encodings(3, 4)


def test_samples_follow_the_model():
    teacher, s = make_task(P, d=50, n=30, seed=4)
    assert s.X.shape == (30, 2, 50) and s.W.shape == (30, 2, 50) and s.T.shape == (30, 2, 2)
    assert np.allclose(s.X - s.W, teacher.P)                       # x_l = p_l + sigma z_l
    h_star = s.W @ teacher.Q_star / math.sqrt(50)                   # h*_l = sigma z_l . Q*/sqrt(d)
    S = np.exp(h_star[:, :, None] * h_star[:, None, :])
    S /= S.sum(-1, keepdims=True)
    assert np.allclose(s.T, 0.7 * S + 0.3 * np.array(P.A))
    assert np.allclose(s.T.sum(-1), 1.0)
    assert np.allclose(s.Y, np.einsum("nlk,nkd->nld", s.T, s.W))    # y = T (sigma Z)


def test_content_scale_and_teacher_statistics():
    teacher, s = make_task(P, d=200, n=400, seed=1)
    assert abs(s.W.std() - P.sigma) < 0.01
    streams = [seed_streams(k)["teacher"].standard_normal(1000) for k in range(400)]
    assert abs(np.mean([np.mean(q * q) for q in streams]) - 1.0) < 0.01  # 4.5 standard errors


def test_same_seed_same_bits_and_independent_streams():
    t1, s1 = make_task(P, d=40, n=25, seed=7)
    t2, s2 = make_task(P, d=40, n=25, seed=7)
    assert np.array_equal(t1.Q_star, t2.Q_star) and np.array_equal(s1.X, s2.X) and np.array_equal(s1.T, s2.T)
    t3, s3 = make_task(P, d=40, n=25, seed=8)
    assert not np.array_equal(s1.X, s3.X)
    # a longer training set extends the shorter one; the teacher does not depend on n
    t4, s4 = make_task(P, d=40, n=60, seed=7)
    assert np.array_equal(t4.Q_star, t1.Q_star) and np.array_equal(s4.X[:25], s1.X)


def test_normalized_teacher():
    t, _ = make_task(P, d=300, n=2, seed=0, normalize_teacher=True)
    assert t.rho_hat == pytest.approx(P.sigma**2, rel=1e-12)


def test_chunks_cover_n():
    teacher = make_teacher(P, 10, np.random.default_rng(0))
    sizes = [c.n for c in iter_sample_chunks(teacher, 23, np.random.default_rng(1), chunk_size=10)]
    assert sizes == [10, 10, 3]


def test_longer_sequences_with_A_override():
    A = np.array([[0.5, 0.3, 0.2], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6]])
    teacher, s = make_task(P, d=16, n=5, seed=0, L=3, A=A)
    assert s.X.shape == (5, 3, 16) and np.allclose(s.T.sum(-1), 1.0)
    assert np.array_equal(teacher.A, A)


def test_softmax_is_stable():
    S = softmax_rows(np.array([[1000.0, 0.0], [-1000.0, 0.0]]))
    assert np.all(np.isfinite(S)) and np.allclose(S.sum(-1), 1.0)
    T = teacher_attention(np.zeros((1, 2)), 0.0, np.eye(2))
    assert np.allclose(T, 0.5)


@pytest.mark.parametrize("kwargs, name", [
    (dict(d=0, n=5), "d"), (dict(d=5, n=0), "n"), (dict(d=5, n=5, L=1), "L"),
    (dict(d=5, n=5, seed=-1), "seed"), (dict(d=5, n=5, L=3), "A"),
    (dict(d=5, n=5, L=3, A=np.eye(2)), "A"), (dict(d=5, n=5, A=[[0.5, 0.6], [0.5, 0.5]]), "A"),
    (dict(d=5, n=5, A=[[np.nan, 1], [0.5, 0.5]]), "A"), (dict(d=2.5, n=5), "d"),
])
def test_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        make_task(P, **kwargs)


def test_check_A_rejects_negative():
    with pytest.raises(ValueError, match="A"):
        check_A([[1.2, -0.2], [0.5, 0.5]], 2)
