"""Bad archives: one clear error naming the file (exit 2 on the command line), nothing written."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

#: pyspark's notice about untested pandas versions (no pandas object goes to Spark here)
pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")

from shuffledp.cli import _register_commands, app
from shuffledp.core.errors import ValidationError
from shuffledp.engines import archive as archive_mod
from shuffledp.engines.archive import METADATA_KEY, ArchiveError, aggregate_archives, open_archives, simulate_archive

_register_commands()

SIM = dict(epsilon=1.0, delta=1e-6, n=6000, params={"d": 16}, partitions=2, row_group=1500)


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    root = tmp_path_factory.mktemp("good")
    simulate_archive("slh", root / "a", seed=1, **SIM)
    simulate_archive("slh", root / "b", seed=2, **SIM)
    simulate_archive("ldp_krr", root / "krr", epsilon=1.0, delta=0.0, n=6000, params={"d": 16}, seed=1, partitions=2)
    return root


def one_line_error(args, *names):
    res = CliRunner().invoke(app, args)
    out = res.output
    assert res.exit_code == 2, out
    assert "Traceback" not in out, out
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), out
    for nm in names:
        assert str(nm) in lines[0], out
    return lines[0]


def copy_archive(src, dst):
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def rewrite(path, meta_change=None, table_change=None):
    t = pq.read_table(path)
    meta = json.loads(t.schema.metadata[METADATA_KEY])
    if meta_change:
        meta_change(meta)
    if table_change:
        t = table_change(t)
    t = t.replace_schema_metadata({METADATA_KEY: json.dumps(meta).encode()})
    pq.write_table(t, path)


def test_good_archive_aggregates(good):
    info, stat, est = aggregate_archives([good / "a"])
    assert info.users == 6000 and stat.sum() > 0
    res = CliRunner().invoke(app, ["aggregate", str(good / "a"), "--json"])
    assert res.exit_code == 0, res.output
    rel = json.loads(res.output)
    assert rel["protocol"] == "slh" and rel["users"] == 6000 and rel["statistic"] == stat.tolist()
    assert rel["privacy"].startswith("(1, 1e-06)-DP")


def test_garbage_file(good, tmp_path):
    a = copy_archive(good / "a", tmp_path / "a")
    (a / "part-00001.parquet").write_bytes(b"not parquet at all" * 10)
    with pytest.raises(ArchiveError, match="part-00001.parquet: not a readable Parquet file"):
        open_archives([a])
    out = tmp_path / "release.json"
    one_line_error(["aggregate", str(a), "--out", str(out)], "part-00001.parquet", "not a readable Parquet")
    assert not out.exists()


def test_truncated_file(good, tmp_path):
    a = copy_archive(good / "a", tmp_path / "a")
    f = a / "part-00000.parquet"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    one_line_error(["aggregate", str(a)], "part-00000.parquet")


def test_corrupt_data_page_is_detected(good, tmp_path):
    """A flipped byte inside a data page (footer intact) fails its page checksum."""
    a = copy_archive(good / "a", tmp_path / "a")
    f = a / "part-00000.parquet"
    raw = bytearray(f.read_bytes())
    raw[200] ^= 0xFF
    f.write_bytes(bytes(raw))
    with pytest.raises(ArchiveError, match="part-00000.parquet"):
        aggregate_archives([a])
    one_line_error(["aggregate", str(a)], "part-00000.parquet")


def test_plain_parquet_is_not_an_archive(tmp_path):
    f = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"y": np.arange(10)}), f)
    one_line_error(["aggregate", str(f)], "plain.parquet", "not a shuffledp archive")


def test_other_task_mixed_in(good):
    msg = one_line_error(["aggregate", str(good / "a" / "part-00000.parquet"), str(good / "b" / "part-00001.parquet")],
                         "b/part-00001.parquet", "another archive")
    assert "task" in msg


def test_other_protocol_mixed_in(good):
    one_line_error(["aggregate", str(good / "a"), str(good / "krr" / "part-00001.parquet")],
                   "krr/part-00001.parquet", "another archive")


def test_missing_and_duplicate_parts(good):
    one_line_error(["aggregate", str(good / "a" / "part-00000.parquet")], "incomplete", "[1]")
    one_line_error(["aggregate", str(good / "a"), str(good / "a" / "part-00000.parquet")], "duplicate part 0")


def test_schema_mismatch_in_metadata(good, tmp_path):
    a = copy_archive(good / "a", tmp_path / "a")
    for f in sorted(a.iterdir()):
        rewrite(f, meta_change=lambda m: m["schema"][1].__setitem__(1, "<i4"))
    one_line_error(["aggregate", str(a)], "part-00000.parquet", "message schema")


def test_column_type_not_the_schema(good, tmp_path):
    a = copy_archive(good / "a", tmp_path / "a")
    f = a / "part-00001.parquet"
    rewrite(f, table_change=lambda t: t.set_column(1, "y", t.column("y").cast(pa.int32())))
    one_line_error(["aggregate", str(a)], "part-00001.parquet", "column 'y'")


def test_parameters_tampered(good, tmp_path):
    a = copy_archive(good / "a", tmp_path / "a")
    rewrite(a / "part-00001.parquet", meta_change=lambda m: m.__setitem__("epsilon", 2.0))
    one_line_error(["aggregate", str(a)], "part-00001.parquet", "epsilon")


def test_no_such_path_and_empty_folder(tmp_path):
    one_line_error(["aggregate", str(tmp_path / "nope")], "nope", "no such file")
    (tmp_path / "empty").mkdir()
    one_line_error(["aggregate", str(tmp_path / "empty")], "empty", "no .parquet")


def test_unknown_engine(good):
    one_line_error(["aggregate", str(good / "a"), "--engine", "ray"], "--engine")


def test_archive_out_exists(good):
    one_line_error(["archive", "slh", "--param", "d=16", "--n", "6000", "--out", str(good / "a")], "--out", "exists")


def test_archive_bad_protocol_parameters(tmp_path):
    one_line_error(["archive", "slh", "--n", "6000", "--out", str(tmp_path / "x")], "d")
    one_line_error(["archive", "cdp_laplace_count", "--n", "6000", "--out", str(tmp_path / "x")], "central")
    assert not (tmp_path / "x").exists() and not list(tmp_path.iterdir())


def test_failure_mid_write_leaves_nothing(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(archive_mod, "write_part", boom)
    with pytest.raises(RuntimeError):
        simulate_archive("slh", tmp_path / "a", seed=1, **SIM)
    assert list(tmp_path.iterdir()) == []


def test_central_protocol_refused(tmp_path):
    with pytest.raises(ValidationError, match="central-model"):
        simulate_archive("cdp_laplace_hist", tmp_path / "a", epsilon=1.0, delta=0.0, n=100, params={"d": 4})


def test_cli_archive_then_aggregate(tmp_path):
    res = CliRunner().invoke(app, ["archive", "ldp_oracle", "--eps", "1", "--delta", "0", "--n", "4000",
                                   "--param", "d=64", "--param", "oracle=oue", "--partitions", "2",
                                   "--out", str(tmp_path / "oue")])
    assert res.exit_code == 0, res.output
    assert "4,000 messages in 2 file(s)" in res.output
    info = open_archives([tmp_path / "oue"])
    assert info.meta["columns"]["bits"] == "bytes"  # OUE reports arrive packed: d bits in d/8 bytes
    res = CliRunner().invoke(app, ["aggregate", str(tmp_path / "oue"), "--top", "3"])
    assert res.exit_code == 0, res.output
    assert "Privacy: (1, 0)-DP" in res.output


@pytest.mark.parametrize("dtype,shape", [("|u1", (13,)), ("|b1", (4, 3)), ("|i1", (9,)), ("<u2", (10,)), ("<i8", ())])
def test_column_encodings_round_trip(dtype, shape):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2 if dtype in ("|u1", "|b1", "|i1") else 1000, size=(50, *shape)).astype(np.dtype(dtype))
    arr, enc = archive_mod._encode_column(a, dtype, shape)
    assert enc == ("plain" if not shape else "packbits" if np.dtype(dtype).itemsize == 1 else "bytes")
    if enc == "packbits":
        assert arr.type.byte_width == (int(np.prod(shape)) + 7) // 8  # one bit per 0/1 entry
    back = archive_mod._decode_column(pa.chunked_array([arr]), dtype, shape, enc)
    assert back.dtype == np.dtype(dtype) and np.array_equal(back, a)


def test_missing_engine_extra_is_one_line(good, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    msg = one_line_error(["aggregate", str(good / "a"), "--engine", "dask"], "shuffledp[dask]")
    assert "distributed" in msg


def test_scheduler_needs_dask(good):
    one_line_error(["aggregate", str(good / "a"), "--scheduler", "tcp://x:1"], "--scheduler")


def test_cli_aggregate_same_release_on_every_engine(good, dask_engine, spark_engine):
    """`aggregate --engine dask|spark --json` prints the local release (a running Spark session is
    reused and left running)."""
    def release(*extra):
        res = CliRunner().invoke(app, ["aggregate", str(good / "a"), "--json", *extra])
        assert res.exit_code == 0, res.output
        rel = json.loads(res.output.strip().splitlines()[-1])
        rel.pop("engine")
        return rel

    local = release()
    assert release("--engine", "dask") == local
    assert release("--engine", "spark") == local
    assert not spark_engine.session.sparkContext._jsc.sc().isStopped()


def test_cli_simulate_out_archives_the_oracle_round(tmp_path):
    args = ["simulate", "--mechanism", "hcms", "--d", "64", "--n", "5000", "--chunk", "2000", "--seed", "3",
            "--out", str(tmp_path / "r")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    info = open_archives([tmp_path / "r"])
    assert len(info.files) == 3 and info.users == 5000
    assert info.meta["protocol"] == "ldp_oracle"
    assert info.meta["params"] == {"d": 64, "oracle": "hcms", "oracle_params": {"hash_seed": 3}}
    _, stat, est = aggregate_archives([tmp_path / "r"])
    assert est.n == 5000 and stat.shape
    one_line_error(args, "--out", "exists")
