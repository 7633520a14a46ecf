"""Models with data, and `sample`: the library's model runs (`host sample`'s, with the same
options and the same draws for the same seed) from Python.

    import fused_mh
    model = fused_mh.LinearRegression(X, y, beta_prior="normal:0,10",
                                      sigma_prior="half-normal:10")
    post = fused_mh.sample(model, chains=8192, device="cuda")   # or device="cpu"
    post.draws          # [chain, draw, param] float32, ArviZ's order
    post.names          # ["beta[1]", ..., "sigma"]
    post.summary()      # {name: {mean, sd, q05, q50, q95, nested_rhat, ess}}
    more = fused_mh.sample(model, steps=2000, resume=post)   # continues post's chains

The data may be NumPy arrays, lists, PyTorch tensors (CPU or CUDA) or JAX arrays: they are
copied to the host as float32 (float64 converted, as `host sample` converts its `.npy` files)
and uploaded to the GPU once per run. Priors are text, as `host sample`'s flags: a
coefficient (and the hierarchical mean) `flat`, `normal:LOC,SCALE` or `student-t:DF,LOC,SCALE`
(one for every coefficient, or a list of one per column); a scale (`sigma`, `tau`) `flat`,
`half-normal:SCALE`, `half-cauchy:SCALE` or `half-t:DF,SCALE`. A bad input raises
`ValueError` naming it, when `sample` checks the model.
"""

import hashlib

import numpy as np

from . import _native
from ._arrays import is_gpu_array, is_torch_tensor, like_input_on_device
from ._checks import real, unsigned
from ._checks import step_size as checked_step_size


def _data(name, a, ndim):
    """`a` as a C-contiguous float32 NumPy array of `ndim` dimensions."""
    if is_torch_tensor(a):
        a = a.detach().cpu().numpy()
    a = np.asarray(a)
    if a.dtype.kind not in "fiub":
        raise TypeError(f"{name} has dtype {a.dtype}: expected real numbers")
    if a.ndim != ndim:
        raise ValueError(f"{name} has shape {a.shape}: expected {ndim} dimensions")
    return np.ascontiguousarray(a, dtype=np.float32)


def _priors(name, prior):
    """A prior's text, or a list of them (one per coefficient) joined as `host sample` takes
    them."""
    if isinstance(prior, str):
        return prior
    if isinstance(prior, (list, tuple)) and all(isinstance(p, str) for p in prior):
        return ";".join(prior)
    raise TypeError(f"{name} = {prior!r}: expected a prior's text or a list of them")


class _Regression:
    """What both regressions hold: `x[N, K]`, `y[N]` and the priors' text by argument name."""

    def __init__(self, x, y, priors):
        self.arrays = {"x": _data("x", x, 2), "y": _data("y", y, 1)}
        self.priors = {name: _priors(name, prior) for name, prior in priors.items()}
        self.dim = self.arrays["x"].shape[1] + (1 if "sigma_prior" in priors else 0)

    def __repr__(self):
        n, k = self.arrays["x"].shape
        return f"{type(self).__name__}({n} rows, {k} columns, {self.priors})"


class LinearRegression(_Regression):
    """`y ~ normal(X beta, sigma)`: `x[N, K]` (the columns as given: add a column of ones for
    an intercept), `y[N]`. Parameters `beta[1..K]` and `sigma` (sampled as log sigma)."""

    kind = "linreg"

    def __init__(self, x, y, *, beta_prior="flat", sigma_prior="flat"):
        super().__init__(x, y, {"beta_prior": beta_prior, "sigma_prior": sigma_prior})


class LogisticRegression(_Regression):
    """`y ~ Bernoulli(logit^-1(X beta))`: `x[N, K]`, `y[N]` of 0 and 1. Parameters
    `beta[1..K]`."""

    kind = "logreg"

    def __init__(self, x, y, *, beta_prior="flat"):
        super().__init__(x, y, {"beta_prior": beta_prior})


class HierarchicalNormal:
    """The non-centred hierarchical normal model (eight schools): `y[J]` the groups'
    estimates, `se[J]` their standard errors; `theta_j = mu + tau theta~_j`. Parameters
    `theta[1..J]`, `mu` and `tau` (sampled as log tau)."""

    kind = "hier-normal"

    def __init__(self, y, se, *, mu_prior="normal:0,5", tau_prior="half-cauchy:5"):
        self.arrays = {"y": _data("y", y, 1), "se": _data("se", se, 1)}
        self.dim = len(self.arrays["y"]) + 2
        self.priors = {"mu_prior": _priors("mu_prior", mu_prior),
                       "tau_prior": _priors("tau_prior", tau_prior)}

    def __repr__(self):
        return f"HierarchicalNormal({len(self.arrays['y'])} groups, {self.priors})"


class DenseGaussian:
    """`N(mean, Sigma)`: `mean[dim]` and the lower Cholesky factor of `Sigma` (`cov_factor`)
    or of its inverse (`prec_factor`), `[dim, dim]`. Parameters `x[1..dim]`."""

    kind = "dense-gaussian"

    def __init__(self, mean, *, cov_factor=None, prec_factor=None):
        if (cov_factor is None) == (prec_factor is None):
            raise ValueError("give one of cov_factor and prec_factor")
        name, factor = (("cov_factor", cov_factor) if cov_factor is not None
                        else ("prec_factor", prec_factor))
        self.arrays = {"mean": _data("mean", mean, 1), name: _data(name, factor, 2)}
        self.priors = {}
        self.dim = len(self.arrays["mean"])

    def __repr__(self):
        return f"DenseGaussian(dim {len(self.arrays['mean'])})"


def _fingerprint(model):
    """A digest of what defines `model`: its kind, its arrays (shapes and bytes) and its priors'
    text, so that a resume can tell that it is given the model it continues."""
    h = hashlib.blake2b(model.kind.encode())
    for name in sorted(model.arrays):
        a = model.arrays[name]
        h.update(f"{name}{a.shape}".encode())
        h.update(a.tobytes())
    for name in sorted(model.priors):
        h.update(f"{name}={model.priors[name]}".encode())
    return h.hexdigest()


class Posterior:
    """A model run's draws and diagnostics (see `sample`), and where a run that continues it
    starts (`sample(model, resume=posterior)`): the final states `states[chain, param]` on the
    unconstrained scale (a scale as its log) and the step counter `next_step`."""

    def __init__(self, result, superchain_size, run, model):
        # [draw, chain, param] as the run keeps them, to ArviZ's [chain, draw, param].
        self.draws = np.ascontiguousarray(result["draws"].transpose(1, 0, 2))
        self.names = list(result["names"])
        self.acceptance = result["acceptance"]
        self.step_size = result["step_size"]
        self.factor = result["factor"]
        self.nested_rhat = result["nested_rhat"]
        self.ess = result["ess"]
        self.superchain_size = superchain_size
        self.converged = bool(np.all(self.nested_rhat < 1.01))
        self.states = result["states"]
        self.next_step = result["next_step"]
        self._run = run
        self._model = _fingerprint(model)

    def __getitem__(self, name):
        """The draws `[chain, draw]` of parameter `name`."""
        return self.draws[:, :, self.names.index(name)]

    def to_arviz(self):
        """The draws as an ArviZ `DataTree`, one posterior variable per parameter
        (`fused_mh.to_arviz`; needs `arviz_base`)."""
        from ._arviz import to_arviz
        return to_arviz(self)

    def summary(self):
        """Per parameter: mean, sd, the 5/50/95 % quantiles (the kept values sorted, the one at
        `round(p (n - 1))`, as `host sample`'s summary.json), nested R-hat and ESS."""
        out = {}
        for d, name in enumerate(self.names):
            v = np.sort(self.draws[:, :, d].astype(np.float64).ravel())
            q = lambda p: v[min(int(round(p * (len(v) - 1))), len(v) - 1)]  # noqa: E731
            out[name] = {"mean": float(v.mean()), "sd": float(v.std(ddof=1)),
                         "q05": float(q(0.05)), "q50": float(q(0.5)), "q95": float(q(0.95)),
                         "nested_rhat": float(self.nested_rhat[d]), "ess": float(self.ess[d])}
        return out

    def __repr__(self):
        c, n, _ = self.draws.shape
        state = "converged" if self.converged else "NOT converged"
        return f"Posterior({c} chains x {n} draws of {self.names}, {state})"


_DEFAULTS = {"chains": 16384, "warmup": 2000, "seed": 0, "target_accept": 0.234,
             "precondition": "dense", "superchain_size": 16}


def sample(model, *, chains=None, warmup=None, steps=1000, thin=10, seed=None,
           target_accept=None, precondition=None, superchain_size=None, device="cuda",
           resume=None):
    """Samples `model` (a `LinearRegression`, `LogisticRegression`, `HierarchicalNormal` or
    `DenseGaussian`) as `host sample` does with the same options (the defaults are its:
    `chains=16384`, `warmup=2000`, `seed=0`, `target_accept=0.234`, `precondition="dense"`,
    `superchain_size=16`): `warmup` adapting steps (per-chain step sizes towards
    `target_accept`, and the proposal's shape from the pooled chains: `precondition` none,
    diagonal or dense), then `steps` steps keeping every `thin`-th. On the GPU
    (`device="cuda"`) or the CPU reference (`device="cpu"`), which give the same draws to
    within the GPU's special functions.
    Returns a `Posterior`: draws `[chain, draw, param]`, names, acceptance, the frozen step
    size and factor, nested R-hat (superchains of `superchain_size` chains) and ESS per
    parameter, and whether every nested R-hat is below 1.01.

    `resume=posterior` continues that run of the same model (as `host sample --resume`): its
    chains from their final states, with its frozen step size and factor, its random stream
    from where it stopped and no warm-up, for `steps` more steps; the draws are those the run
    would have drawn next, to the bit. The chains, seed and superchains are the run's: those
    arguments (and `warmup`, `target_accept`, `precondition`) are refused with `resume`."""
    if device not in ("cuda", "cpu"):
        raise ValueError(f"device = {device!r}: expected 'cuda' or 'cpu'")
    given = {"chains": chains, "warmup": warmup, "seed": seed, "target_accept": target_accept,
             "precondition": precondition, "superchain_size": superchain_size}
    if resume is None:
        run = {k: _DEFAULTS[k] if v is None else v for k, v in given.items()}
        continuation = None
    else:
        if not isinstance(resume, Posterior):
            raise TypeError(f"resume = {resume!r}: expected the Posterior of an earlier run")
        for name, value in given.items():
            if value is not None and not (name == "warmup" and value == 0):
                raise ValueError(f"{name} = {value!r}: a resumed run keeps its own "
                                 f"(resume continues the run's chains and proposal)")
        if _fingerprint(model) != resume._model:
            raise ValueError("resume: the model (its data or priors) is not the one the "
                             "resumed run sampled")
        run = dict(resume._run, warmup=0)
        continuation = {"states": resume.states, "factor": resume.factor,
                        "step_size": resume.step_size, "first_step": resume.next_step}
    run.update(steps=steps, thin=thin)
    run = _checked_run(run)
    result = _native.sample_model(model.kind, model.arrays, model.priors, run,
                                  device == "cuda", continuation)
    return Posterior(result, run["superchain_size"], run, model)


def _checked_run(run):
    """`sample`'s run settings with every number checked by name (`fused_mh._checks`), at the
    widths `fused_mh::ModelRun` holds them: chains, seed and superchains 64-bit, the warm-up,
    steps and thinning 32-bit."""
    widths = {"chains": 64, "warmup": 32, "steps": 32, "thin": 32, "seed": 64,
              "superchain_size": 64}
    checked = {name: unsigned(name, run[name], bits) for name, bits in widths.items()}
    if not isinstance(run["precondition"], str):
        raise TypeError(f"precondition = {run['precondition']!r}: expected 'none', 'diagonal' "
                        "or 'dense'")
    return dict(run, target_accept=real("target_accept", run["target_accept"]), **checked)


MODELS = (LinearRegression, LogisticRegression, HierarchicalNormal, DenseGaussian)


def step_chains(model, x, step_size, steps, seed=0, first_step=0, thin=0):
    """`steps` random-walk steps of the chains `x[B, dim]` (unconstrained states, a scale as
    its log) of `model`, proposal `x + step_size eps`, random numbers from `seed` and the step
    counter `first_step` (`sample`'s scheme: the same chains as a resumed `sample` with that
    proposal). On the GPU where `x` is a CUDA tensor or a JAX GPU array (the model's data
    uploaded for the call), else the CPU reference. Returns the final states `x` (in the
    framework and on the device of the input), `accepted_count[B]` (uint64) and, with
    `thin > 0`, `trace[steps // thin, B, dim]`: every `thin`-th state on the parameters' own
    scale (NumPy)."""
    states = _data("x", x, 2)
    if states.shape[1] != model.dim:
        raise ValueError(f"x has shape {tuple(states.shape)}: {model!r} has {model.dim} "
                         "parameters per chain")
    steps, thin = unsigned("steps", steps, bits=32), unsigned("thin", thin, bits=32)
    if steps < 1:
        raise ValueError(f"steps = {steps}: expected steps >= 1")
    step_size, first_step = checked_step_size(step_size), unsigned("first_step", first_step)
    chains = states.shape[0]
    run = {"chains": chains, "warmup": 0, "steps": steps, "thin": thin or steps,
           "seed": unsigned("seed", seed), "target_accept": 0.234, "precondition": "none",
           "superchain_size": 1}
    resume = {"states": states, "factor": np.eye(model.dim, dtype=np.float32),
              "step_size": step_size, "first_step": first_step}
    result = _native.sample_model(model.kind, model.arrays, model.priors, run,
                                  is_gpu_array(x), resume, False)
    out = {"x": like_input_on_device(x, result["states"]), "accepted_count": result["accepted"],
           "steps": int(steps)}
    if thin:
        out["trace"] = result["draws"]
    return out
