"""`Model` as the module it stands in for: its arrays cannot be changed behind its back, every
value is checked when it is set (naming it), its state saves and restores, and it prints as
what it is. On NumPy arrays (the CPU reference), so these run in CI."""

import numpy as np
import pytest

import fused_mh
from conftest import problem, same_bits


def test_arrays_are_read_only_and_set_whole():
    model = fused_mh.Model(4)
    # The reference module's `m.mu[0] = 5.0` must not be silently lost: it raises.
    with pytest.raises(ValueError, match="read-only"):
        model.mu[0] = 5.0
    with pytest.raises(ValueError, match="read-only"):
        model.sigma[1] = 2.0
    assert np.array_equal(model.mu, np.zeros(4)) and np.array_equal(model.sigma, np.ones(4))
    model.mu = [1.0, 2.0, 3.0, 4.0]
    model.sigma = np.full(4, 0.5, np.float32)
    assert np.array_equal(model.mu, [1, 2, 3, 4]) and np.array_equal(model.sigma, [0.5] * 4)
    assert model.mu.dtype == np.float32 and model.sigma.dtype == np.float32
    assert [name for name, _ in model.named_buffers()] == ["mu", "sigma"]
    assert all(not b.flags.writeable for b in model.buffers())


F32 = np.float32


@pytest.mark.parametrize("name, value, error, message", [
    ("sigma", np.full(4, np.nan, F32), ValueError, "sigma"),
    ("sigma", np.array([1.0, 0.0, 1.0, 1.0], F32), ValueError, r"sigma\[1\] = 0 must be > 0"),
    ("sigma", np.array([1.0, 1.0, -2.0, 1.0], F32), ValueError, r"sigma\[2\] = -2 must be > 0"),
    ("mu", np.array([0.0, np.inf, 0.0, 0.0], F32), ValueError, r"mu\[1\]"),
    ("mu", np.zeros(3, np.float32), ValueError, "3"),
    ("seed", -1, ValueError, r"seed = -1: must be in \[0, 2\^64\)"),
    ("seed", 2**64, ValueError, "seed"),
    ("seed", None, TypeError, "seed = None: expected an integer"),
    ("seed", 1.5, TypeError, "seed"),
    ("seed", True, TypeError, "seed"),
    ("step", -3, ValueError, "step = -3"),
    ("step_size", 0.0, ValueError, "step_size = 0.0"),
    ("step_size", float("nan"), ValueError, "step_size"),
    ("step_size", -0.1, ValueError, "step_size"),
    ("step_size", "big", TypeError, "step_size"),
])
def test_bad_values_raise_when_set(name, value, error, message):
    model = fused_mh.Model(4, step_size=0.3, seed=7)
    before = model.state_dict()
    with pytest.raises(error, match=message):
        setattr(model, name, value)
    # A refused value changes nothing.
    after = model.state_dict()
    assert after.keys() == before.keys()
    assert all(np.array_equal(after[k], before[k]) for k in before)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"dim": 0}, ValueError, "dim = 0"),
    ({"dim": True}, TypeError, "dim"),
    ({"dim": 2.5}, TypeError, "dim = 2.5"),
    ({"dim": 2 ** 32}, ValueError, r"dim = 4294967296: must be in \[0, 2\^32\)"),
    ({"dim": 4, "seed": -1}, ValueError, "seed = -1"),
    ({"dim": 4, "seed": None}, TypeError, "seed = None"),
    ({"dim": 4, "step_size": 0}, ValueError, "step_size"),
])
def test_bad_constructor_values_raise(kwargs, error, message):
    with pytest.raises(error, match=message):
        fused_mh.Model(**kwargs)


def test_state_dict_saves_and_restores_the_stream():
    x, _, _ = problem(50, 6, 3)
    model = fused_mh.Model(6, step_size=0.4, seed=11)
    model.mu, model.sigma = np.linspace(-1, 1, 6, dtype=F32), np.linspace(0.5, 2, 6, dtype=F32)
    model(x)
    model(x)
    state = model.state_dict()
    assert state["step"] == 2 and state["seed"] == 11 and state["step_size"] == 0.4
    want, _ = model(x)
    # A fresh model loaded with the state makes the same third call, bit for bit.
    other = fused_mh.Model(6)
    other.load_state_dict(state)
    got, _ = other(x)
    assert same_bits(got, want) and other.step == 3
    # The dict holds copies: changing it changes no model.
    state["mu"][0] = 99.0
    assert model.mu[0] == np.float32(-1.0)


def test_load_state_dict_checks_keys_and_values():
    model = fused_mh.Model(3, seed=5)
    state = model.state_dict()
    with pytest.raises(KeyError, match="missing \\['seed'\\]"):
        model.load_state_dict({k: v for k, v in state.items() if k != "seed"})
    with pytest.raises(KeyError, match="unexpected \\['temperature'\\]"):
        model.load_state_dict({**state, "temperature": 1.0})
    # One bad value: nothing is loaded, not even the good ones.
    with pytest.raises(ValueError, match="sigma"):
        model.load_state_dict({**state, "seed": 9, "sigma": np.array([1.0, -1.0, 1.0], np.float32)})
    assert model.seed == 5 and np.array_equal(model.sigma, np.ones(3))


def test_repr_and_device_moves():
    model = fused_mh.Model(4, step_size=0.25, seed=3)
    assert repr(model) == "Model(dim=4, step_size=0.25, seed=3, step=0)"
    assert model.to("cpu") is model
    for bad in ["gpu", "cuda:x", -1, "cpu:1"]:
        with pytest.raises(ValueError, match="device"):
            model.to(bad)
    data = fused_mh.LinearRegression(np.ones((5, 2)), np.zeros(5))
    stepper = fused_mh.Model(data, step_size=0.2)
    assert repr(stepper).startswith("Model(") and "seed=0, step=0" in repr(stepper)
    assert list(stepper.buffers()) == [] and "mu" not in stepper.state_dict()
    with pytest.raises(TypeError, match="model with data"):
        stepper.to("cuda")


def test_no_gpu_means_to_cuda_is_a_runtime_error():
    try:
        fused_mh._native.Device(0)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            fused_mh.Model(4).to("cuda")
    else:
        pytest.skip("a GPU is present: to('cuda') uploads there")


def test_every_public_name_is_documented():
    for name in fused_mh.__all__:
        assert getattr(fused_mh, name).__doc__, name
    for name in ["forward", "mu", "sigma", "step", "seed", "step_size", "state_dict",
                 "load_state_dict", "to", "buffers", "named_buffers"]:
        assert getattr(fused_mh.Model, name).__doc__, name


def test_the_package_is_typed():
    """`py.typed` and the stub ship with the package, and the stub declares every public name
    and every public method of `Model`, with the signatures the code has."""
    import ast
    import inspect
    from pathlib import Path
    root = Path(fused_mh.__file__).parent
    assert (root / "py.typed").is_file()
    stub = ast.parse((root / "__init__.pyi").read_text())
    declared = {n.name: n for n in stub.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert set(fused_mh.__all__) <= set(declared)
    for name in fused_mh.__all__:
        if isinstance(declared[name], ast.FunctionDef):
            stub_args = [a.arg for a in declared[name].args.args + declared[name].args.kwonlyargs]
            code_args = [p for p, v in inspect.signature(getattr(fused_mh, name)).parameters.items()
                         if v.kind not in (v.VAR_KEYWORD, v.VAR_POSITIONAL)]
            assert stub_args == code_args, name
    model_stub = {n.name for n in declared["Model"].body if isinstance(n, ast.FunctionDef)}
    public = {n for n in dir(fused_mh.Model) if not n.startswith("_")} - {"dim"}
    assert public <= model_stub | {"step_size", "seed", "step"}, public - model_stub


def test_float64_is_converted_with_a_warning_naming_the_array():
    """The one dtype rule (as `host` reads float64 `.npy` files): float64 becomes float32 with a
    `DtypeWarning` naming the array, pointing at the caller's line, and the step is the one
    float32 inputs take, bit for bit; a list has no dtype and is taken quietly."""
    import warnings
    x, mu, sigma = problem(40, 6, 2)
    want, accepted = fused_mh.step(x, mu, sigma, 0.5, seed=3)
    for name in ["x", "mu", "sigma"]:
        args = {"x": x, "mu": mu, "sigma": sigma}
        args[name] = args[name].astype(np.float64)
        with pytest.warns(fused_mh.DtypeWarning, match=f"^{name} is float64; converted") as w:
            got, got_accepted = fused_mh.step(args["x"], args["mu"], args["sigma"], 0.5, seed=3)
        assert w[0].filename == __file__
        assert same_bits(got, want) and np.array_equal(got_accepted, accepted)
    model = fused_mh.Model(6)
    with pytest.warns(fused_mh.DtypeWarning, match="^mu is float64"):
        model.mu = np.zeros(6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.sigma = [1.0] * 6
    r = None
    with pytest.warns(fused_mh.DtypeWarning, match="^x is float64"):
        r = fused_mh.run(x.astype(np.float64), mu, sigma, 0.5, 4, seed=1)
    assert same_bits(r["x"], fused_mh.run(x, mu, sigma, 0.5, 4, seed=1)["x"])


def test_the_version_is_the_installed_one():
    from importlib.metadata import version
    assert fused_mh.__version__ == version("fused-mh")
