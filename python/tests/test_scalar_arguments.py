"""Every scalar argument of every function, given a value that is not one (a float where a
count goes, a string, None, a bool, a negative or too large integer, a NaN), is refused with a
`TypeError` or `ValueError` whose message starts with the argument's name and value; and a
chain array of the wrong shape is named `x` with its shape. (Before these checks the Rust
side's own conversion said "'float' object cannot be interpreted as an integer" and named
nothing.)"""

import numpy as np
import pytest

import fused_mh
from conftest import problem

#: Values no count or seed takes, each with the exception it raises (None is a default in
#: `sample` and a missing argument in `run`: `test_none_is_named_where_it_is_no_default`).
NOT_COUNTS = [(2.5, TypeError), ("1", TypeError), (True, TypeError),
              (float("nan"), TypeError), (-1, ValueError), (2 ** 64, ValueError)]
#: Values no step size takes.
NOT_STEP_SIZES = [("0.5", TypeError), (True, TypeError),
                  (0.0, ValueError), (-0.5, ValueError), (float("nan"), ValueError),
                  (float("inf"), ValueError)]


def gaussian_call(function, name, value):
    """`function` on a small Gaussian problem with the argument `name` set to `value`."""
    x, mu, sigma = problem(8, 3, 5)
    if function == "step":
        args = {"step_size": 0.5, "seed": 1, "step": 2, name: value}
        return fused_mh.step(x, mu, sigma, **args)
    if function == "step_with_noise":
        noise, uniform = np.zeros_like(x), np.full(8, 0.5, np.float32)
        return fused_mh.step_with_noise(x, mu, sigma, value, noise, uniform)
    args = {"step_size": 0.5, "steps": 20, "thin": 2, "seed": 3, "first_step": 0,
            "steps_per_launch": 10, "warmup": 0, "burn_in": 0, name: value}
    return fused_mh.run(x, mu, sigma, **args)


def model_call(name, value):
    """`sample` of the eight schools on the CPU with the setting `name` set to `value`."""
    y = np.array([28, 8, -3, 7, -1, 1, 18, 12], np.float32)
    se = np.array([15, 10, 16, 11, 9, 11, 10, 18], np.float32)
    run = {"chains": 16, "warmup": 50, "steps": 40, "thin": 10, "seed": 0,
           "superchain_size": 4, "target_accept": 0.5, name: value}
    return fused_mh.sample(fused_mh.HierarchicalNormal(y, se), device="cpu", **run)


def refused(call, name, error):
    with pytest.raises(error) as caught:
        call()
    assert str(caught.value).startswith(f"{name} = "), str(caught.value)


@pytest.mark.parametrize("value, error", NOT_COUNTS)
@pytest.mark.parametrize("function, name", [
    ("step", "seed"), ("step", "step"), ("run", "steps"), ("run", "thin"), ("run", "seed"),
    ("run", "first_step"), ("run", "steps_per_launch"), ("run", "warmup"),
    ("run", "burn_in")])
def test_counts_are_named(function, name, value, error):
    refused(lambda: gaussian_call(function, name, value), name, error)


@pytest.mark.parametrize("value, error", NOT_COUNTS)
@pytest.mark.parametrize("name", ["chains", "warmup", "steps", "thin", "seed",
                                  "superchain_size"])
def test_sample_settings_are_named(name, value, error):
    refused(lambda: model_call(name, value), name, error)


def test_the_widths_of_the_rust_side_are_named():
    """A launch's steps and a model run's steps are 32-bit: 2^32 is refused by name there,
    where a run's steps (64-bit) would take it."""
    refused(lambda: gaussian_call("run", "steps_per_launch", 2 ** 32), "steps_per_launch",
            ValueError)
    refused(lambda: model_call("steps", 2 ** 32), "steps", ValueError)
    refused(lambda: model_call("target_accept", "high"), "target_accept", TypeError)
    refused(lambda: model_call("precondition", 3), "precondition", TypeError)


@pytest.mark.parametrize("value, error", NOT_STEP_SIZES)
@pytest.mark.parametrize("function", ["step", "step_with_noise", "run"])
def test_step_sizes_are_named(function, value, error):
    refused(lambda: gaussian_call(function, "step_size", value), "step_size", error)


def test_none_is_named_where_it_is_no_default():
    for name in ["seed", "step", "step_size"]:
        refused(lambda: gaussian_call("step", name, None), name, TypeError)
    for name in ["thin", "seed", "first_step", "steps_per_launch"]:
        refused(lambda: gaussian_call("run", name, None), name, TypeError)
    for name in ["steps", "thin"]:
        refused(lambda: model_call(name, None), name, TypeError)


def test_chains_of_the_wrong_shape_are_named_x():
    _, mu, sigma = problem(8, 3, 5)
    with pytest.raises(ValueError, match=r"^x has shape \[3, 8\]: .*dim 3"):
        fused_mh.step(np.zeros((3, 8), np.float32), mu, sigma, 0.5)
    with pytest.raises(ValueError, match=r"^x has shape \[0, 3\]: .*at least 1"):
        fused_mh.step(np.zeros((0, 3), np.float32), mu, sigma, 0.5)
