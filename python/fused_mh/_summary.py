"""`summary(result)`: a `run` result's table per dimension, as `host run` prints it: the mean
and standard deviation over every chain's steps, split (nested) R-hat and ESS."""

import numpy as np


def _host(a):
    """A result array on the host: NumPy as it is, a torch tensor or a JAX array copied."""
    if hasattr(a, "detach"):
        return a.detach().cpu().numpy()
    return np.asarray(a)


def summary(result):
    """Per dimension of a `run` result: `mean` and `sd` over all chains' steps (from the
    per-chain means and variances: the grand mean, and the pooled variance, the chains'
    variances' mean plus the variance of their means), `nested_rhat` and `ess` (None where
    the run had no checkpoint). A pandas `DataFrame` when pandas is installed, else the same
    table as text."""
    if not isinstance(result, dict) or "mean" not in result or "var" not in result:
        raise TypeError("summary takes a run result (a dict with mean and var)")
    mean, var = _host(result["mean"]).astype(np.float64), _host(result["var"]).astype(np.float64)
    grand = mean.mean(axis=0)
    sd = np.sqrt(var.mean(axis=0) + ((mean - grand) ** 2).mean(axis=0))
    d = result.get("diagnostics")
    columns = {"mean": grand, "sd": sd}
    if d is not None:
        columns["nested_rhat"] = np.asarray(d["nested_rhat"], np.float64)
        columns["ess"] = np.asarray(d["ess"], np.float64)
    try:
        import pandas as pd
    except ImportError:
        pd = None
    if pd is not None:
        return pd.DataFrame(columns, index=pd.RangeIndex(len(grand), name="dim"))
    names = list(columns)
    lines = ["   dim " + " ".join(f"{n:>12}" for n in names)]
    for i in range(len(grand)):
        lines.append(f"{i:>6} " + " ".join(f"{columns[n][i]:>12.5g}" for n in names))
    return "\n".join(lines)
