"""Results as ArviZ data: `to_arviz(result)` for `run`'s dict (its trace `[draws, chains,
dim]` turned to ArviZ's `(chain, draw, dim)`) and for `sample`'s `Posterior` (its draws are in
that order already). `arviz_base` is imported only here, when called: it is optional."""

import numpy as np


def to_arviz(result, name="x"):
    """An ArviZ `DataTree` of `result`: a `run` result with a trace (`thin > 0`), its states as
    the posterior variable `name` with dims `(chain, draw, dim)`; or a `Posterior` of `sample`,
    one posterior variable per parameter name (`beta[1]`, ...) with dims `(chain, draw)`.
    Needs `arviz_base` (`pip install arviz-base`)."""
    try:
        from arviz_base import from_dict
    except ImportError as e:
        raise ImportError("to_arviz needs arviz_base: pip install arviz-base") from e
    from ._models import Posterior
    if isinstance(result, Posterior):
        posterior = {n: np.asarray(result.draws[:, :, i]) for i, n in enumerate(result.names)}
        return from_dict({"posterior": posterior})
    if not isinstance(result, dict) or "trace" not in result:
        raise TypeError("to_arviz takes a Posterior, or a run result with a trace (thin > 0)")
    trace = np.asarray(result["trace"])
    tree = from_dict({"posterior": {name: trace.transpose(1, 0, 2)}}, dims={name: ["dim"]},
                     coords={"dim": np.arange(trace.shape[2])})
    if "step_size" in result:
        tree["posterior"].attrs["step_size"] = result["step_size"]
    return tree
