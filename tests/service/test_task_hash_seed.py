"""A CMS/HCMS task created without ``hash_seed`` records the one its mechanism drew.

Clients and the analyzer build the mechanism from the task configuration, so the seed must be
in it: otherwise each would draw its own family and the estimates would be garbage.
"""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from shuffledp.service.client import ShuffleDPClient
from shuffledp.service.config import TaskConfig, build_mechanism, create_task_config
from shuffledp.service.hpke import generate_key_pair
from shuffledp.service.wire import KeyConfig, encode_key_list

ANALYZER, SHUFFLER = "http://analyzer.test", "http://shuffler.test"


def _task(name: str, **params):
    return create_task_config(
        name="sketch", mechanism={"kind": "frequency", "name": name, "epsilon": 2.0,
                                  "params": {"d": 500, "k": 8, "m": 16, **params}},
        target_central={"eps": 1.9, "delta": 1e-6}, min_batch_size_floor=10)


@pytest.mark.parametrize("name", ["cms", "hcms"])
def test_task_without_seed_records_the_drawn_one_and_the_client_uses_it(name: str, tmp_path) -> None:
    cfg = _task(name)
    seed = cfg.mechanism["params"]["hash_seed"]
    assert isinstance(seed, int) and 0 <= seed < 2**53
    assert _task(name).mechanism["params"]["hash_seed"] != seed   # drawn per task
    # the seed is part of the digest-bound configuration a client fetches
    again = TaskConfig.from_json(cfg.to_json())
    assert again.digest == cfg.digest and again.mechanism["params"]["hash_seed"] == seed

    _sk, pk = generate_key_pair()
    keys = encode_key_list([KeyConfig(1, pk)])

    def handler(req: httpx.Request) -> httpx.Response:
        if req.url.path == "/v1/hpke-keys":
            return httpx.Response(200, content=keys)
        return httpx.Response(200, json={"config": cfg.to_json(), "config_digest": cfg.digest.hex()})

    client = ShuffleDPClient(ANALYZER, SHUFFLER, cfg.task_id, tmp_path / "c.db",
                             http=httpx.Client(transport=httpx.MockTransport(handler)))
    analyzer_mech = build_mechanism(cfg.mechanism)
    assert client.mech.hash_seed == analyzer_mech.hash_seed == seed
    np.testing.assert_array_equal(client.mech.family.all_items(), analyzer_mech.family.all_items())
    client.report(3)
    client.close()


@pytest.mark.parametrize("name", ["cms", "hcms"])
def test_task_with_seed_keeps_it(name: str) -> None:
    cfg = _task(name, hash_seed=42)
    assert cfg.mechanism["params"]["hash_seed"] == 42
    assert build_mechanism(cfg.mechanism).hash_seed == 42


def test_task_of_a_mechanism_without_hash_family_is_unchanged() -> None:
    cfg = create_task_config(name="grr", mechanism={"kind": "frequency", "name": "grr", "epsilon": 2.0,
                                                    "params": {"d": 8}},
                             target_central={"eps": 1.9, "delta": 1e-6}, min_batch_size_floor=10)
    assert cfg.mechanism["params"] == {"d": 8}


@pytest.mark.parametrize("name", ["cms", "HCMS"])
def test_a_stored_configuration_without_seed_builds_one_fixed_family(name: str) -> None:
    # configurations recorded without hash_seed were built with seed 0; building one must not draw
    spec = {"kind": "frequency", "name": name, "epsilon": 2.0, "params": {"d": 500, "k": 8, "m": 16}}
    a, b = build_mechanism(spec), build_mechanism(spec)
    assert a.hash_seed == b.hash_seed == 0
    assert spec["params"] == {"d": 500, "k": 8, "m": 16}   # the caller's spec is not modified
