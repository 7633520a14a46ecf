#!/usr/bin/env python3
"""Time to a correct answer on posteriordb's posteriors (tests/posteriordb/), on the GPU machine
in one call: fused-mh (`host sample`, GPU), NumPyro NUTS at its best (16 chains,
chain_method="parallel" on the CPU cores) and BlackJAX's random-walk Metropolis (vmapped
chains, GPU).

Each run is its own process, timed from its start to its written result (`wall_s`); `sample_s`
is the sampling alone as the run reports it (fused-mh: warm-up and sampling, after the CUDA
context and module load; NumPyro: `MCMC.run`, its JIT compile included, as a user meets it;
BlackJAX: the jitted loop's second call, compile excluded, its first call in the wall time).
A run's answer is then checked, not assumed, against the reference summary with the
posteriordb tests' tolerances: every parameter's mean and 5/50/95 % quantiles within 0.1
reference sd, its sd within 10 %, R-hat below 1.01 (nested R-hat for fused-mh's superchains,
split R-hat for the others). NumPyro and BlackJAX double their draws until the check passes
(up to 8x); fused-mh runs its defaults.

Usage: python3 bench/time_to_answer.py HOST_BINARY OUT_JSON
       (and, internally, --one numpyro|blackjax NAME DRAWS FACTOR_JSON OUT_NPY)
Environment: TTA_FUSED_SETTINGS, a JSON object {label: [host sample flags]}, replaces fused-mh's
two settings (a sweep); TTA_PEERS=0 leaves NumPyro and BlackJAX out (to compare two builds of
fused-mh in one call); TTA_TOOLS=numpyro (a comma-separated list) runs only those peers."""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from report_file import check_new, write_new

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "posteriordb")
POSTERIORS = ["sblri-blr", "kidiq-kidscore_momiq", "earnings-logearn_height",
              "eight_schools-eight_schools_noncentered", "wells_data-wells_dist"]


def load(name):
    """The posterior's data as the models take it: design and outcomes, or y and se."""
    d = json.load(open(os.path.join(DATA, name, "data.json")))
    ones = lambda v: np.stack([np.ones(len(v)), np.asarray(v, float)], axis=1)  # noqa: E731
    if name == "sblri-blr":
        return {"x": np.asarray(d["X"], float), "y": np.asarray(d["y"], float)}
    if name == "kidiq-kidscore_momiq":
        return {"x": ones(d["mom_iq"]), "y": np.asarray(d["kid_score"], float)}
    if name == "earnings-logearn_height":
        return {"x": ones(d["height"]), "y": np.log(np.asarray(d["earn"], float))}
    if name == "wells_data-wells_dist":
        return {"x": ones(d["dist"]), "y": np.asarray(d["switched"], float)}
    return {"y": np.asarray(d["y"], float), "se": np.asarray(d["sigma"], float)}


def host_flags(name, folder):
    """`host sample`'s model flags for the posterior, its data written into `folder`."""
    data = load(name)
    for key, value in data.items():
        np.save(os.path.join(folder, key + ".npy"), value.astype(np.float32))
    files = [f"--{k}={os.path.join(folder, k + '.npy')}" for k in data]
    return {
        "sblri-blr": ["--model=linreg", "--beta-prior=normal:0,10", "--sigma-prior=half-normal:10"],
        "kidiq-kidscore_momiq": ["--model=linreg", "--sigma-prior=half-cauchy:2.5"],
        "earnings-logearn_height": ["--model=linreg"],
        "wells_data-wells_dist": ["--model=logreg"],
        "eight_schools-eight_schools_noncentered": [
            "--model=hier-normal", "--mu-prior=normal:0,5", "--tau-prior=half-cauchy:5"],
    }[name] + files


def check(name, draws, names, rhat):
    """`draws` [chains, draws, params] against the reference: (ok, the worst miss)."""
    ref = json.load(open(os.path.join(DATA, name, "reference_summary.json")))["params"]
    misses = []
    for d, p in enumerate(names):
        r = ref[p]
        v = draws[:, :, d].ravel()
        mean, sd = v.mean(), v.std(ddof=1)
        if abs(mean - r["mean"]) >= 0.1 * r["sd"]:
            misses.append(f"{p} mean {abs(mean - r['mean']) / r['sd']:.2f} sd off")
        if abs(sd / r["sd"] - 1) >= 0.1:
            misses.append(f"{p} sd {sd / r['sd'] - 1:+.1%}")
        for q, key in [(5, "q05"), (50, "q50"), (95, "q95")]:
            if abs(np.percentile(v, q) - r[key]) >= 0.1 * r["sd"]:
                misses.append(f"{p} {key} off")
        if not rhat[d] < 1.01:
            misses.append(f"{p} R-hat {rhat[d]:.4f}")
    return (not misses, "; ".join(misses[:3]))


def names_of(name):
    k = {"sblri-blr": 5}.get(name, 2)
    if name.startswith("eight"):
        return [f"theta[{j}]" for j in range(1, 9)] + ["mu", "tau"]
    betas = [f"beta[{j}]" for j in range(1, k + 1)]
    return betas if name.startswith("wells") else betas + ["sigma"]


def numpyro_one(name, draws, out):
    """NUTS, 16 chains in parallel on the CPU cores, `draws` after as many warm-up steps."""
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=16"
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from numpyro.diagnostics import split_gelman_rubin
    from numpyro.infer import MCMC, NUTS
    data = {k: jnp.asarray(v, jnp.float32) for k, v in load(name).items()}
    flat = lambda shape: dist.ImproperUniform(dist.constraints.real, (), shape)  # noqa: E731
    positive = dist.ImproperUniform(dist.constraints.positive, (), ())

    def model():
        if name.startswith("eight"):
            mu = numpyro.sample("mu", dist.Normal(0, 5))
            tau = numpyro.sample("tau", dist.HalfCauchy(5))
            t = numpyro.sample("t", dist.Normal(0, 1).expand([8]))
            theta = numpyro.deterministic("theta", mu + tau * t)
            numpyro.sample("y", dist.Normal(theta, data["se"]), obs=data["y"])
            return
        x, y = data["x"], data["y"]
        k = x.shape[1]
        prior = dist.Normal(0, 10).expand([k]) if name == "sblri-blr" else flat((k,))
        beta = numpyro.sample("beta", prior)
        if name.startswith("wells"):
            numpyro.sample("obs", dist.Bernoulli(logits=x @ beta), obs=y)
            return
        sigma = numpyro.sample("sigma", {"sblri-blr": dist.HalfNormal(10),
                                         "kidiq-kidscore_momiq": dist.HalfCauchy(2.5)}
                               .get(name, positive))
        numpyro.sample("obs", dist.Normal(x @ beta, sigma), obs=y)

    mcmc = MCMC(NUTS(model), num_warmup=draws, num_samples=draws, num_chains=16,
                chain_method="parallel", progress_bar=False)
    start = time.perf_counter()
    mcmc.run(jax.random.PRNGKey(0))
    s = mcmc.get_samples(group_by_chain=True)
    jax.block_until_ready(s)
    sample_s = time.perf_counter() - start
    if name.startswith("eight"):
        arr = np.concatenate([np.asarray(s["theta"]), np.asarray(s["mu"])[..., None],
                              np.asarray(s["tau"])[..., None]], axis=2)
    else:
        parts = [np.asarray(s["beta"])] + ([] if name.startswith("wells")
                                           else [np.asarray(s["sigma"])[..., None]])
        arr = np.concatenate(parts, axis=2)
    rhat = np.asarray(split_gelman_rubin(arr))
    np.save(out, arr)
    return {"sample_s": sample_s, "rhat": rhat.tolist(), "version": numpyro.__version__}


def blackjax_one(name, steps, factor_json, out):
    """Random-walk Metropolis over 16384 vmapped chains on the GPU, given fused-mh's adapted
    proposal (its frozen factor and step size: the adaptation BlackJAX does not have), from
    standard-normal starts, half the steps as burn-in, every 10th step kept."""
    import jax
    import jax.numpy as jnp
    import blackjax
    data = {k: jnp.asarray(v, jnp.float32) for k, v in load(name).items()}
    f = json.load(open(factor_json))
    dim = len(f["names"])
    chol = jnp.asarray(np.asarray(f["factor"], np.float32).reshape(dim, dim) * f["step_size"])

    def halfcauchy(v, s):  # log density of sigma = e^v, Jacobian included
        return -jnp.log1p((jnp.exp(v) / s) ** 2) + v

    def logdensity(v):
        if name.startswith("eight"):
            t, mu, s = v[:8], v[8], v[9]
            theta = mu + jnp.exp(s) * t
            return (-0.5 * jnp.sum(t ** 2) - 0.5 * (mu / 5) ** 2 + halfcauchy(s, 5.0)
                    - 0.5 * jnp.sum(((data["y"] - theta) / data["se"]) ** 2))
        x, y = data["x"], data["y"]
        k = x.shape[1]
        beta, eta = v[:k], x @ v[:k]
        if name.startswith("wells"):
            return jnp.sum(y * eta - jnp.logaddexp(0.0, eta))
        s = v[k]
        lp = -0.5 * jnp.sum(((y - eta) / jnp.exp(s)) ** 2) - y.shape[0] * s + s
        if name == "sblri-blr":
            lp += -0.5 * jnp.sum((beta / 10) ** 2) - 0.5 * (jnp.exp(s) / 10) ** 2
        if name == "kidiq-kidscore_momiq":
            lp += halfcauchy(s, 2.5) - s
        return lp

    def proposal(key, position):
        return position + chol @ jax.random.normal(key, position.shape)

    rmh = blackjax.rmh(logdensity, proposal)
    chains = 16384

    @jax.jit
    def run(key):
        keys = jax.random.split(key, chains + 1)
        starts = jax.random.normal(keys[0], (chains, dim))
        states = jax.vmap(rmh.init)(starts)

        def one(states, key):
            states, _ = jax.vmap(rmh.step)(jax.random.split(key, chains), states)
            return states, states.position

        def block(states, key):
            states, positions = jax.lax.scan(one, states, jax.random.split(key, 10))
            return states, positions[-1]

        states, kept = jax.lax.scan(block, states, jax.random.split(keys[1], steps // 10))
        return kept[len(kept) // 2:]

    jax.block_until_ready(run(jax.random.PRNGKey(1)))
    start = time.perf_counter()
    kept = np.asarray(jax.block_until_ready(run(jax.random.PRNGKey(0))))
    sample_s = time.perf_counter() - start
    draws = np.array(np.swapaxes(kept, 0, 1))  # [chains, kept, dim], unconstrained
    if name.startswith("eight"):
        tau = np.exp(draws[..., 9])
        draws = np.concatenate([draws[..., 8:9] + tau[..., None] * draws[..., :8],
                                draws[..., 8:9], tau[..., None]], axis=2)
    elif not name.startswith("wells"):
        draws[..., -1] = np.exp(draws[..., -1])
    from numpyro.diagnostics import split_gelman_rubin
    rhat = np.asarray(split_gelman_rubin(draws))
    np.save(out, draws)
    return {"sample_s": sample_s, "rhat": rhat.tolist(), "version": blackjax.__version__}


def timed(cmd):
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{cmd[:3]}: {done.stderr[-2000:]}")
    return wall, done.stdout


# fused-mh's two settings, the same for every posterior: its defaults (16384 chains), and the
# defaults with half the chains (8192: the model kernel's one wave on the H200 takes three
# chains a warp instead of six).
FUSED = {"fused_mh": [], "fused_mh_8192": ["--chains=8192"]}
FUSED = json.loads(os.environ.get("TTA_FUSED_SETTINGS", "null")) or FUSED
PEERS = os.environ.get("TTA_PEERS", "1") != "0"
TOOLS = os.environ.get("TTA_TOOLS", "numpyro,blackjax").split(",")


def main(host, out_json):
    check_new(out_json)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        # The first process on a machine compiles the PTX module (the driver caches the result
        # for the processes after it): timed once, on the first posterior's data.
        first = os.path.join(tmp, "first")
        os.makedirs(first)
        cold, _ = timed([host, "sample", *host_flags(POSTERIORS[0], first), "--chains=64",
                         "--warmup=50", "--steps=10", "--thin=1", f"--out={first}/out"])
        results.append({"first_process_wall_s": cold})
        print("first process (PTX compile, cold driver cache):", cold, flush=True)
        for name in POSTERIORS:
            folder = os.path.join(tmp, name)
            os.makedirs(folder)
            names = names_of(name)
            row = {"posterior": name}
            for key, flags in FUSED.items():
                run_dir = os.path.join(folder, key)
                wall, _ = timed([host, "sample", *host_flags(name, folder), *flags,
                                 f"--out={run_dir}"])
                summary = json.load(open(os.path.join(run_dir, "summary.json")))
                draws = np.load(os.path.join(run_dir, "draws.npy"))
                rhat = [summary["params"][p]["nested_rhat"] for p in names]
                ok, why = check(name, draws, names, rhat)
                row[key] = {"wall_s": wall, "sample_s": summary["sampling_seconds"], "ok": ok,
                            "why": why, "chains": summary["chains"],
                            "steps": summary["warmup"] + summary["steps"]}
                print(name, key, row[key], flush=True)
            factor = os.path.join(folder, next(iter(FUSED)), "summary.json")
            peers = [("numpyro", [1000, 2000, 4000, 8000]),
                     ("blackjax", [3000, 6000, 12000, 24000])]
            for tool, sizes in [p for p in peers if PEERS and p[0] in TOOLS]:
                for size in sizes:
                    npy_out = os.path.join(folder, f"{tool}-{size}.npy")
                    try:
                        wall, stdout = timed([sys.executable, __file__, "--one", tool, name,
                                              str(size), factor, npy_out])
                    except RuntimeError as e:
                        row[tool] = {"error": str(e)[-300:]}
                        break
                    report = json.loads(stdout.strip().splitlines()[-1])
                    ok, why = check(name, np.load(npy_out), names, report["rhat"])
                    row[tool] = {"wall_s": wall, "sample_s": report["sample_s"], "ok": ok,
                                 "why": why, "size": size, "version": report["version"]}
                    print(name, tool, row[tool], flush=True)
                    if ok:
                        break
            results.append(row)
    write_new(out_json, json.dumps(results, indent=1))


if __name__ == "__main__":
    if sys.argv[1] == "--one":
        tool, name, size, factor, out = sys.argv[2:7]
        report = (numpyro_one(name, int(size), out) if tool == "numpyro"
                  else blackjax_one(name, int(size), factor, out))
        print(json.dumps(report))
    else:
        main(sys.argv[1], sys.argv[2])
