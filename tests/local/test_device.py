"""The PyTorch backend of HR, HCMS, CMS and subset selection (``device=``) gives the numpy path's
statistics, estimates and exact simulations bit for bit (CPU tensors here; CUDA when present)."""

import pickle
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shuffledp.core import ValidationError
from shuffledp.local import frequency_oracle
from shuffledp.local.hadamard import fwht
from shuffledp.local.registry import device_oracles
from shuffledp.local.sketch import ExplicitHashFamily, TabulationHashFamily, grouped_bit_sums

torch = pytest.importorskip("torch")
from shuffledp.local import _device  # noqa: E402
from shuffledp.local._device import (  # noqa: E402
    bincount_device,
    fwht_device,
    grouped_bit_sums_device,
    table_query_device,
)

CELLS = st.sampled_from([1, 3, 97, None])  # None: the default budget (one chunk at these sizes)


def _budget(cells):
    """Every kernel's default cell budget on CPU tensors set to ``cells`` (many chunks when small)."""
    return mock.patch.object(_device, "CPU_TENSOR_CELLS", cells or _device.CPU_TENSOR_CELLS)


def _same(a, b) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _check_pair(cpu, dev, n, rng, seed, sim_counts=True):
    """aggregate, estimate (values and stderr) and simulate_statistic: numpy vs the device, bit for bit."""
    r = cpu.randomize(rng.integers(0, cpu.d, n), rng)
    stat = cpu.aggregate(r)
    _same(dev.aggregate(r), stat)
    if n:
        a, b = cpu.estimate(stat, n), dev.estimate(stat, n)
        _same(a.values, b.values)
        _same(a.stderr, b.stderr)
    if sim_counts:
        counts = np.bincount(rng.integers(0, cpu.d, n), minlength=cpu.d)
        _same(dev.simulate_statistic(counts, np.random.default_rng(seed)),
              cpu.simulate_statistic(counts, np.random.default_rng(seed)))
    return stat


@settings(max_examples=40, deadline=None)
@given(d=st.integers(2, 600), eps=st.floats(0.1, 7.0), variant=st.sampled_from([None, "general", "high_privacy"]),
       n=st.integers(0, 400), cells=CELLS, seed=st.integers(0, 2**32 - 1))
def test_hadamard_response_torch_cpu_bit_identical(d, eps, variant, n, cells, seed):
    rng = np.random.default_rng(seed)
    cpu = frequency_oracle("hr", eps, d, variant=variant)
    dev = frequency_oracle("hr", eps, d, variant=variant, device="torch-cpu")
    assert (dev.blocks, dev.block_size) == (cpu.blocks, cpu.block_size)
    with _budget(cells):
        stat = _check_pair(cpu, dev, n, rng, seed, sim_counts=d <= 64)
        blocks = stat.reshape(cpu.blocks, cpu.block_size)
        _same(fwht_device(blocks, "torch-cpu"), fwht(blocks, axis=1))


@settings(max_examples=40, deadline=None)
@given(d=st.integers(2, 600), eps=st.floats(0.1, 7.0), k=st.integers(1, 40), log_m=st.integers(1, 8),
       n=st.integers(0, 400), cells=CELLS, explicit=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_hcms_torch_cpu_bit_identical(d, eps, k, log_m, n, cells, explicit, seed):
    rng = np.random.default_rng(seed)
    m = 1 << log_m
    family = {"hash_table": rng.integers(0, m, (k, d))} if explicit else {"k": k, "hash_seed": seed}
    cpu = frequency_oracle("hcms", eps, d, m=m, **family)
    dev = frequency_oracle("hcms", eps, d, m=m, device="torch-cpu", **family)
    with _budget(cells):
        stat = _check_pair(cpu, dev, n, rng, seed)
        W = fwht(stat, axis=1)
        _same(table_query_device(W, dev.family, "torch-cpu").astype(np.float64), cpu.family.query(W))


@settings(max_examples=25, deadline=None)
@given(d=st.integers(2, 400), eps=st.floats(0.2, 6.0), k=st.integers(1, 30), m=st.integers(2, 70),
       n=st.integers(0, 300), cells=CELLS, seed=st.integers(0, 2**32 - 1))
def test_cms_torch_cpu_bit_identical(d, eps, k, m, n, cells, seed):
    """CMS: the bit sums of aggregate, the estimate's sketch query and the simulation's hash counts."""
    rng = np.random.default_rng(seed)
    cpu = frequency_oracle("cms", eps, d, k=k, m=m, hash_seed=seed)
    dev = frequency_oracle("cms", eps, d, k=k, m=m, hash_seed=seed, device="torch-cpu")
    with _budget(cells):
        _check_pair(cpu, dev, n, rng, seed)


@settings(max_examples=30, deadline=None)
@given(d=st.integers(2, 300), eps=st.floats(0.1, 6.0), omega=st.integers(1, 299), n=st.integers(0, 200),
       cells=CELLS, seed=st.integers(0, 2**32 - 1))
def test_subset_selection_torch_cpu_bit_identical(d, eps, omega, n, cells, seed):
    rng = np.random.default_rng(seed)
    w = min(omega, d - 1)
    cpu = frequency_oracle("ss", eps, d, omega=w)
    dev = frequency_oracle("ss", eps, d, omega=w, device="torch-cpu")
    assert dev.item_dtype == cpu.item_dtype
    with _budget(cells):
        _check_pair(cpu, dev, n, rng, seed)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 300), groups=st.integers(1, 9), n_bits=st.integers(1, 40), cells=CELLS,
       seed=st.integers(0, 2**32 - 1))
def test_grouped_bit_sums_device_equals_numpy(n, groups, n_bits, cells, seed):
    """Unpacked on the device in the numpy layout (bit c mod 8 of byte c // 8), padding bits ignored."""
    rng = np.random.default_rng(seed)
    packed = rng.integers(0, 256, (n, (n_bits + 7) // 8), dtype=np.uint8)
    g = rng.integers(0, groups, n)
    want = grouped_bit_sums(packed, g, groups, n_bits)
    _same(grouped_bit_sums_device(packed, g, groups, n_bits, "torch-cpu", max_cells=cells), want)


def test_large_query_many_chunks_and_int32_items(rng):
    """A query over more items than one chunk holds, and subset reports stored as int32 (d > 2^15)."""
    fam = TabulationHashFamily(64, 512, 70001, 11)
    G = rng.integers(-1000, 1000, (64, 512))
    _same(table_query_device(G, fam, "torch-cpu", max_cells=64 * 1000).astype(np.float64), fam.query(G))
    ss = frequency_oracle("ss", 6.0, 40000)
    r = ss.randomize(rng.integers(0, 40000, 300), rng)
    assert r["items"].dtype == np.int32
    _same(frequency_oracle("ss", 6.0, 40000, device="torch-cpu").aggregate(r), ss.aggregate(r))


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(0, 6), log_k=st.integers(0, 9), cells=CELLS, seed=st.integers(0, 2**32 - 1))
def test_fwht_device_equals_numpy(rows, log_k, cells, seed):
    a = np.random.default_rng(seed).integers(-2**40, 2**40, (rows, 1 << log_k))
    _same(fwht_device(a, "torch-cpu", max_cells=cells), fwht(a, axis=1))


def test_fwht_device_refuses_other_lengths():
    with pytest.raises(ValidationError, match="power-of-2"):
        fwht_device(np.zeros((2, 6), dtype=np.int64), "torch-cpu")


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 500), length=st.integers(1, 50), weighted=st.booleans(), cells=CELLS,
       dtype=st.sampled_from([np.int16, np.int32, np.int64, np.uint16]), seed=st.integers(0, 2**32 - 1))
def test_bincount_device_equals_numpy(n, length, weighted, cells, dtype, seed):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, length, n).astype(dtype)
    w = rng.integers(-3, 4, n).astype(np.int8) if weighted else None
    want = np.bincount(idx.astype(np.intp), weights=w, minlength=length)
    got = bincount_device(idx, length, "torch-cpu", weights=w, max_cells=cells)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


def test_explicit_family_on_device_matches_table(rng):
    table = rng.integers(0, 8, (5, 30))
    fam = ExplicitHashFamily(table, 8)
    G = rng.integers(-9, 9, (5, 8))
    want = G[np.arange(5)[:, None], table].sum(axis=0)
    np.testing.assert_array_equal(table_query_device(G, fam, "torch-cpu", max_cells=1), want)


def test_device_option_names_and_refusals():
    assert device_oracles() == ["blh", "cms", "hcms", "hr", "olh", "ss"]
    for name in ("hr", "ss", "cms", "hcms"):
        m = frequency_oracle(name, 1.0, 50, device="torch-cpu")
        assert m.device == "torch-cpu" and "device='torch-cpu'" in repr(m)
        assert frequency_oracle(name, 1.0, 50).device == "cpu"
        assert pickle.loads(pickle.dumps(m)).device == "torch-cpu"  # engines ship the oracle to workers
        with pytest.raises(ValidationError, match="device must be") as e:
            frequency_oracle(name, 1.0, 50, device="tpu")
        assert e.value.parameter == "device"
    with pytest.raises(ValidationError, match="device"):
        frequency_oracle("grr", 1.0, 50, device="torch-cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message for a missing GPU")
def test_missing_cuda_refused_unless_fallback():
    for name in ("hr", "ss", "cms", "hcms"):
        with pytest.raises(ValidationError, match="no CUDA GPU") as e:
            frequency_oracle(name, 1.0, 50, device="cuda")
        assert e.value.parameter == "device"
        assert frequency_oracle(name, 1.0, 50, device="cuda", device_fallback=True).device == "cpu"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU visible to PyTorch")
@pytest.mark.parametrize("name,d,params", [("hr", 1000, {}), ("hr", 5000, {"variant": "general"}),
                                           ("ss", 700, {}), ("cms", 3000, {"k": 64, "m": 128, "hash_seed": 2}),
                                           ("hcms", 3000, {"k": 64, "m": 128, "hash_seed": 2})])
def test_cuda_bit_identical(name, d, params, rng):
    cpu = frequency_oracle(name, 2.0, d, **params)
    dev = frequency_oracle(name, 2.0, d, device="cuda", **params)
    _check_pair(cpu, dev, 5000, rng, 7)
