"""The PyTorch backend of local-hashing aggregation gives the numpy path's integers (CPU tensors)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shuffledp.core import ValidationError
from shuffledp.local import frequency_oracle
from shuffledp.local.hashing import BinaryLocalHashing, LocalHashing, OptimizedLocalHashing, smallest_prime_at_least

torch = pytest.importorskip("torch")
from shuffledp.local._lh_torch import resolve_device, support_counts_torch  # noqa: E402


@settings(max_examples=50, deadline=None)
@given(d=st.integers(2, 300), g=st.integers(2, 400), extra=st.integers(0, 2), n=st.integers(0, 300),
       cells=st.sampled_from([1, 97, 1 << 24]), seed=st.integers(0, 2**32 - 1))
def test_torch_cpu_equals_numpy_and_direct(d, g, extra, n, cells, seed):
    rng = np.random.default_rng(seed)
    prime = smallest_prime_at_least(max(d, 3))
    for _ in range(extra):
        prime = smallest_prime_at_least(prime + 1)
    m = LocalHashing(1.0, d, g, prime=prime)
    r = m.randomize(rng.integers(0, d, n), rng)
    got = support_counts_torch(r["seed"], r["y"], m.prime, m.g, m.d, "torch-cpu", max_cells=cells)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, m.support_counts_direct(r))
    np.testing.assert_array_equal(got, m.aggregate(r))


@pytest.mark.parametrize("cls,d,n", [(BinaryLocalHashing, 997, 6000), (OptimizedLocalHashing, 1000, 9000),
                                     (OptimizedLocalHashing, 1024, 200000)])
def test_torch_dense_blocks_equal_numpy(cls, d, n, rng):
    """Dense offset blocks (coverage rows), with a small cell budget forcing blocks of 3 offsets."""
    cpu = cls(1.0, d)
    tcpu = cls(1.0, d, device="torch-cpu")
    r = cpu.randomize(rng.integers(0, d, n), rng)
    want = cpu.aggregate(r)
    np.testing.assert_array_equal(tcpu.aggregate(r), want)
    np.testing.assert_array_equal(support_counts_torch(r["seed"], r["y"], cpu.prime, cpu.g, d, max_cells=1), want)
    if n <= 10000:
        np.testing.assert_array_equal(want, cpu.support_counts_direct(r))


@settings(max_examples=40, deadline=None)
@given(d=st.integers(2, 300), g=st.integers(2, 400), n=st.integers(0, 3000), rows=st.integers(1, 12),
       overhead=st.sampled_from([0, 50, 10**12]), cells=st.sampled_from([1, 97, 1 << 24]),
       seed=st.integers(0, 2**32 - 1))
def test_torch_block_split_equal_direct(d, g, n, rows, overhead, cells, seed):
    """The tensor path's block split (all dense, mixed, all enumerated) gives the direct counts."""
    from shuffledp.local import _lh_progressions

    rng = np.random.default_rng(seed)
    m = LocalHashing(1.0, d, g, prime=smallest_prime_at_least(max(d, 3)))
    r = m.randomize(rng.integers(0, d, n), rng)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_lh_progressions, "dense_block_rows", lambda P: min(P - 1, rows))
        mp.setattr(_lh_progressions, "_BLOCK_OVERHEAD", overhead)
        got = support_counts_torch(r["seed"], r["y"], m.prime, m.g, m.d, "torch-cpu", max_cells=cells)
    np.testing.assert_array_equal(got, m.support_counts_direct(r))


def test_torch_estimates_identical(rng):
    cpu = OptimizedLocalHashing(2.0, 5000)
    tcpu = frequency_oracle("olh", 2.0, 5000, device="torch-cpu")
    r = cpu.randomize(rng.integers(0, 50, 3000), rng)
    a, b = cpu.estimate(cpu.aggregate(r), 3000), tcpu.estimate(tcpu.aggregate(r), 3000)
    assert np.array_equal(a.values, b.values)


def test_device_names():
    assert resolve_device("cpu") == "cpu" and resolve_device("torch-cpu") == "torch-cpu"
    assert resolve_device(" CPU ") == "cpu"
    for bad in ("gpu", "cuda:x", "", 3):
        with pytest.raises(ValidationError, match="device"):
            resolve_device(bad)
    with pytest.raises(ValidationError, match="device"):
        OptimizedLocalHashing(1.0, 100, device="tpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message for a missing GPU")
def test_missing_cuda_is_a_clear_error_unless_fallback_asked():
    with pytest.raises(ValidationError, match="no CUDA GPU") as e:
        OptimizedLocalHashing(1.0, 100, device="cuda")
    assert e.value.parameter == "device"
    m = OptimizedLocalHashing(1.0, 100, device="cuda", device_fallback=True)
    assert m.device == "cpu"
    assert resolve_device("cuda:0", fallback=True) == "cpu"


def test_huge_prime_falls_back_to_numpy_methods(rng):
    m = LocalHashing(1.0, 10, 4, prime=2147483647, device="torch-cpu")
    r = m.randomize(rng.integers(0, 10, 20), rng)
    np.testing.assert_array_equal(m.aggregate(r), m.support_counts_direct(r))
    with pytest.raises(ValidationError, match="prime"):
        support_counts_torch(r["seed"], r["y"], m.prime, m.g, m.d)
