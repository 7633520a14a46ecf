#!/usr/bin/env python3
"""The reference posterior of posteriordb's wells_data-wells_dist (logistic regression of
`switched` on an intercept and `dist`, flat priors), which posteriordb does not provide: a
long NumPyro NUTS run on the CPU (10 chains of 10,000 draws after 2,000 warm-up steps, thinned
to 10,000 draws as posteriordb's references are), its summary in posteriordb's format.

Usage: wells_reference.py DATA_JSON OUT_DIR   (writes reference_summary.json, reference.npz)"""
import json
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=10")
import jax  # noqa: E402

jax.config.update("jax_platform_name", "cpu")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import numpyro  # noqa: E402
import numpyro.distributions as dist  # noqa: E402
from numpyro.diagnostics import effective_sample_size, split_gelman_rubin  # noqa: E402
from numpyro.infer import MCMC, NUTS  # noqa: E402

data = json.load(open(sys.argv[1]))
out = sys.argv[2]
dist_m = jnp.asarray(data["dist"], dtype=jnp.float64)
switched = jnp.asarray(data["switched"], dtype=jnp.float64)


def model():
    beta = numpyro.sample("beta", dist.ImproperUniform(dist.constraints.real, (), (2,)))
    numpyro.sample("y", dist.Bernoulli(logits=beta[0] + beta[1] * dist_m), obs=switched)


mcmc = MCMC(NUTS(model), num_warmup=2000, num_samples=10000, num_chains=10,
            chain_method="parallel", progress_bar=False)
mcmc.run(jax.random.PRNGKey(20261202), init_params={"beta": jnp.zeros((10, 2))})
chains = np.asarray(mcmc.get_samples(group_by_chain=True)["beta"])  # [10, 10000, 2]
rhat = np.asarray(split_gelman_rubin(chains))
ess = np.asarray(effective_sample_size(chains))
draws = chains[:, ::10, :].reshape(-1, 2)
names = ["beta[1]", "beta[2]"]
summary = {"ndraws": int(draws.shape[0]), "nchains": 10, "params": {}, "method":
           "NumPyro NUTS, 10 chains x (2000 warm-up + 10000) on the CPU, float64, thinned by 10",
           "versions": {"numpyro": numpyro.__version__, "jax": jax.__version__}}
for i, name in enumerate(names):
    v = draws[:, i]
    summary["params"][name] = {
        "mean": float(v.mean()), "sd": float(v.std(ddof=1)),
        "q05": float(np.quantile(v, 0.05)), "q50": float(np.quantile(v, 0.5)),
        "q95": float(np.quantile(v, 0.95)),
        "rhat": float(rhat[i]), "ess_bulk_unthinned": float(ess[i])}
os.makedirs(out, exist_ok=True)
json.dump(summary, open(os.path.join(out, "reference_summary.json"), "w"), indent=1)
np.savez(os.path.join(out, "reference.npz"), draws=draws, names=np.array(names))
print(json.dumps(summary, indent=1))
