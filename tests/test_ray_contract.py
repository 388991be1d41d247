"""The Ray connection is written once in each package (suber_data.scale.ray_runner, suber_env.evaluation.ray_rating:
the env never imports the builder); this holds the two copies to one contract, so they cannot drift again: the
same model environment forwarded to the workers, each package's own code shipped, the same verdict on an address."""

from __future__ import annotations

import socket

import pytest
from suber_env.evaluation import ray_rating

from suber_data.errors import SuberDataError
from suber_data.scale import ray_runner

EVERY_VARIABLE = (*ray_runner.FORWARDED_ENV, *ray_rating.FORWARDED_ENV)


def test_both_forward_the_same_model_environment(monkeypatch):
    for name in EVERY_VARIABLE:
        monkeypatch.setenv(name, f"value-of-{name}")
    builder = ray_runner.runtime_env(ship_code=False)["env_vars"]
    env = ray_rating.runtime_env(ship_code=False)["env_vars"]
    assert env == {k: v for k, v in builder.items() if not k.startswith("SUBER_DATA_")}
    assert set(env) == set(ray_runner.MODEL_ENV)  # the builder adds only its own switches


def test_unset_variables_are_not_forwarded(monkeypatch):
    for name in EVERY_VARIABLE:
        monkeypatch.delenv(name, raising=False)
    assert ray_runner.runtime_env(ship_code=False) == ray_rating.runtime_env(ship_code=False) == {}


def test_each_ships_its_own_package():
    (builder,) = ray_runner.runtime_env(ship_code=True)["py_modules"]
    (env,) = ray_rating.runtime_env(ship_code=True)["py_modules"]
    assert builder.endswith("suber_data") and env.endswith("suber_env")


def test_same_verdict_on_an_address():
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        alive = f"127.0.0.1:{listening.getsockname()[1]}"
        for address in (alive, "auto", "local", "ray://127.0.0.1:1"):  # the last three are ray.init's to resolve
            ray_runner.check_reachable(address)
            ray_rating.check_reachable(address)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{closed.getsockname()[1]}"  # bound, not listening: refused
    with pytest.raises(SuberDataError) as builder:
        ray_runner.check_reachable(dead, timeout=1)
    with pytest.raises(ray_rating.RayRunError) as env:
        ray_rating.check_reachable(dead, timeout=1)
    assert str(builder.value) == str(env.value) and f"no Ray cluster answers at '{dead}'" in str(env.value)
