"""Type stubs of `fused_mh`'s public names (the docstrings are in the modules: `help(fused_mh)`).

An array is any of the inputs the functions take: a NumPy array, a torch tensor or a JAX array
(`Any` here: neither framework is a dependency)."""

from typing import Any, Dict, Iterator, Mapping, Optional, Tuple, Union

import numpy as np

__version__: str

Array = Any
Model_ = Union["LinearRegression", "LogisticRegression", "HierarchicalNormal", "DenseGaussian"]

class DtypeWarning(UserWarning): ...

def step(x: Array, mu: Array, sigma: Array, step_size: float, seed: int = 0, step: int = 0, *,
         target: str = "gaussian", **params: Any) -> Tuple[Array, Array]: ...
def step_with_noise(x: Array, mu: Array, sigma: Array, step_size: float, noise: Array,
                    uniform: Array, *, target: str = "gaussian",
                    **params: Any) -> Tuple[Array, Array]: ...
def run(x: Array, mu: Union[Array, Model_], sigma: Optional[Array] = None,
        step_size: Optional[float] = None, steps: Optional[int] = None, seed: int = 0,
        first_step: int = 0, thin: int = 0, steps_per_launch: int = 100, *,
        warmup: int = 0, target_accept: Optional[float] = None, precondition: bool = False,
        scales: Optional[Array] = None, burn_in: int = 0,
        until_rhat: Optional[float] = None, min_draws: Optional[int] = None,
        superchain_size: int = 1, progress: Optional[bool] = None, target: str = "gaussian",
        **params: Any) -> "RunResult": ...
def initial_states(batch: int, mu: Array, sigma: Array, spread: str = "normal", seed: int = 0,
                   superchain_size: int = 1, *, target: str = "gaussian",
                   **params: Any) -> np.ndarray: ...

class RunResult(Dict[str, Any]):
    def __getattr__(self, name: str) -> Any: ...
    @property
    def acceptance_rate(self) -> float: ...
    @property
    def converged(self) -> bool: ...
    @property
    def draws(self) -> np.ndarray: ...
    def summary(self) -> Any: ...
    def to_arviz(self, name: str = "x") -> Any: ...

class Model:
    dim: int
    step_size: float
    seed: int
    step: int
    def __init__(self, dim: Union[int, Model_], step_size: float = 0.1, seed: int = 0) -> None: ...
    @property
    def mu(self) -> np.ndarray: ...
    @mu.setter
    def mu(self, value: Array) -> None: ...
    @property
    def sigma(self) -> np.ndarray: ...
    @sigma.setter
    def sigma(self, value: Array) -> None: ...
    def forward(self, x: Array) -> Tuple[Array, Array]: ...
    def __call__(self, x: Array) -> Tuple[Array, Array]: ...
    def named_buffers(self) -> Iterator[Tuple[str, np.ndarray]]: ...
    def buffers(self) -> Iterator[np.ndarray]: ...
    def state_dict(self) -> Dict[str, Any]: ...
    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...
    def to(self, device: Any) -> "Model": ...

class LinearRegression:
    dim: int
    def __init__(self, x: Array, y: Array, *, beta_prior: str = "flat",
                 sigma_prior: str = "flat") -> None: ...

class LogisticRegression:
    dim: int
    def __init__(self, x: Array, y: Array, *, beta_prior: str = "flat") -> None: ...

class HierarchicalNormal:
    dim: int
    def __init__(self, y: Array, se: Array, *, mu_prior: str = "normal:0,5",
                 tau_prior: str = "half-cauchy:5") -> None: ...

class DenseGaussian:
    dim: int
    def __init__(self, mean: Array, *, cov_factor: Optional[Array] = None,
                 prec_factor: Optional[Array] = None) -> None: ...

class Posterior:
    draws: np.ndarray
    names: list
    acceptance: Any
    step_size: Any
    factor: Any
    nested_rhat: np.ndarray
    ess: np.ndarray
    superchain_size: int
    converged: bool
    states: np.ndarray
    next_step: int
    def __getitem__(self, name: str) -> np.ndarray: ...
    def summary(self) -> Any: ...
    def to_arviz(self) -> Any: ...

def sample(model: Model_, *, chains: Optional[int] = None, warmup: Optional[int] = None,
           steps: int = 1000, thin: int = 10, seed: Optional[int] = None,
           target_accept: Optional[float] = None, precondition: Optional[str] = None,
           superchain_size: Optional[int] = None, device: str = "cuda",
           resume: Optional[Posterior] = None) -> Posterior: ...

def summary(result: Dict[str, Any]) -> Any: ...
def to_arviz(result: Union[Dict[str, Any], Posterior], name: str = "x") -> Any: ...

__all__ = ["DenseGaussian", "DtypeWarning", "HierarchicalNormal", "LinearRegression",
           "LogisticRegression", "Model", "Posterior", "RunResult", "initial_states", "run",
           "sample", "step", "step_with_noise", "summary", "to_arviz"]
