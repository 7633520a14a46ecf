//! The warm-up on the CPU reference ([`crate::warm_up`] has the loop): each launch
//! [`run_chains`] of its steps from the states the launch before left, the pooled variance
//! from its chains' moments.

use super::run_chains;
use crate::error::Result;
use crate::problem::{Shape, StepConfig};
use crate::warm_up::{Launch, Launched, Warmed, WarmupPlan, run_warm_up};
use crate::{Target, diagnostics};

/// `plan.steps` warm-up steps of the chains `x` (`[batch, dim]`, replaced by the states after
/// them) from step counter `first_step` and `config` ([`run_warm_up`]); `on_step(done)`
/// follows every step with the warm-up's steps done (an error from it stops the warm-up: a
/// caller stops a run this way, as with [`run_chains`]).
pub fn warm_up(
    x: &mut Vec<f32>,
    shape: Shape,
    target: &Target,
    config: &StepConfig,
    first_step: u64,
    plan: WarmupPlan,
    on_step: &mut dyn FnMut(u64) -> Result<()>,
) -> Result<Warmed> {
    let mut launch = |l: Launch<'_>| -> Result<Launched> {
        let out = run_chains(
            x,
            shape,
            target,
            l.config,
            first_step + l.done,
            l.steps,
            0,
            None,
            &mut |_, _| Ok(()),
            &mut |p| on_step(l.done + p.done),
        )?;
        let pooled_variance = match l.pooled {
            true => Some(
                diagnostics::from_chain_moments(shape, 1, l.steps, &out.mean, &out.var)?.variance,
            ),
            false => None,
        };
        *x = out.x;
        Ok(Launched {
            accepted: out.accepted.iter().sum(),
            nonfinite: out.nonfinite.iter().sum(),
            pooled_variance,
        })
    };
    let size = (shape.batch(), shape.dim());
    run_warm_up(config, plan, size, &mut launch, &mut |_| Ok(()))
}
