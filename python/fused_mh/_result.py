"""`RunResult`: what `run` returns. A dict (so `result["x"]` and `**result` work) whose keys are
also attributes (`result.x`), as SciPy's `OptimizeResult`, with the run's table
(`summary()`), its ArviZ data (`to_arviz()`), and the trace in ArviZ's layout (`draws`)."""

import numpy as np


class RunResult(dict):
    """The result of `run`: a dict of the final states `x`, the per-chain counts
    (`accepted_count`, `nonfinite_count`, `null_move_count`), moments (`mean`, `var`), the
    `trace` (`[steps // thin, B, dim]` when `thin > 0`), `diagnostics` (summary.json's, or
    None), `steps`, `step_size`, `next_step`, `stopped_early`, and after a warm-up `warmup`
    (and `scales` when it preconditioned). Each key is an attribute too."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"RunResult has no {name!r} (its keys: "
                                 f"{', '.join(self)})") from None

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self))

    def __repr__(self):
        x = self["x"]
        acc = self.acceptance_rate
        return (f"RunResult({x.shape[0]} chains of dim {x.shape[1]}, {self['steps']} steps "
                f"at step size {self['step_size']:.4g}, acceptance {acc:.3f}, "
                f"converged: {self.converged})")

    @property
    def acceptance_rate(self):
        """Accepted proposals over all proposals of the kept steps (NaN for no steps)."""
        counts = np.asarray(self["accepted_count"], np.float64)
        proposals = counts.size * self["steps"]
        return float(counts.sum() / proposals) if proposals else float("nan")

    @property
    def converged(self):
        """The diagnostics' verdict: every split (nested) R-hat below 1.01 and no blind
        dimension; False when there are no diagnostics (one chain, or under 4 steps)."""
        d = self.get("diagnostics")
        return bool(d is not None and d["converged"])

    @property
    def draws(self):
        """The trace in ArviZ's layout, `(chain, draw, dim)`: a view of `trace` (NumPy)."""
        if "trace" not in self:
            raise ValueError("no trace: run with thin > 0 to keep draws")
        return np.asarray(self["trace"]).transpose(1, 0, 2)

    def summary(self):
        """Per dimension: mean, sd, nested R-hat and ESS (`fused_mh.summary`)."""
        from ._summary import summary
        return summary(self)

    def to_arviz(self, name="x"):
        """The trace as an ArviZ `DataTree` in `(chain, draw, dim)` (`fused_mh.to_arviz`)."""
        from ._arviz import to_arviz
        return to_arviz(self, name)
