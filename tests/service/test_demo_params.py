"""The demo passes its domain size exactly to the protocols whose constructor requires ``d``."""

import inspect

import pytest

from shuffledp.local.registry import constructor_parameters
from shuffledp.service.demo import protocol_demo_params
from shuffledp.shuffle.registry import available_protocols, protocol_class


@pytest.mark.parametrize("name", available_protocols())
def test_domain_size_added_only_where_required(name):
    params, _ = constructor_parameters(protocol_class(name))
    required = {p.name for p in params if p.default is inspect.Parameter.empty}
    got = protocol_demo_params(name, {"x": 1}, 16)
    assert got == ({"x": 1, "d": 16} if "d" in required else {"x": 1})


def test_given_domain_size_is_kept_and_input_not_mutated():
    given = {"d": 8}
    assert protocol_demo_params("hist_kr", given, 16) == {"d": 8}
    given2: dict = {}
    assert protocol_demo_params("hist_kr", given2, 16) == {"d": 16} and given2 == {}


@pytest.mark.parametrize("name", ["hist_kr", "fragmenting", "sample_one", "ldp_oracle"])
def test_protocols_needing_d_get_it(name):
    assert protocol_demo_params(name, {}, 32)["d"] == 32


@pytest.mark.parametrize("name", ["cnt_2m", "rsum_rm", "hh_pem"])
def test_protocols_not_needing_d_do_not_get_it(name):
    assert "d" not in protocol_demo_params(name, {}, 32)
