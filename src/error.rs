//! The library's one error type.

use cudarc::driver::DriverError;

/// Everything that can go wrong, with a message that says what to fix.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A batch of zero chains.
    #[error("the batch is empty: the number of chains must be at least 1")]
    EmptyBatch,
    /// Chains of zero dimensions.
    #[error("dim is 0: each chain must have at least one coordinate")]
    EmptyDim,
    /// A shape beyond what the counter scheme or the address space can index.
    #[error("batch {batch} x dim {dim} is too large: {why}")]
    TooLarge {
        /// Requested number of chains.
        batch: usize,
        /// Requested dimension.
        dim: usize,
        /// Which limit it breaks.
        why: &'static str,
    },
    /// An input whose length does not match the shape it belongs to.
    #[error("{what} has {got} elements, expected {expected}")]
    LengthMismatch {
        /// The input's name (`x`, `mu`, `noise`, ...).
        what: &'static str,
        /// The length the shape implies.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// A NaN or infinity where a finite number is needed.
    #[error("{what}[{index}] = {value} is not finite")]
    NonFinite {
        /// The input's name.
        what: &'static str,
        /// Position of the first offending element.
        index: usize,
        /// Its value.
        value: f32,
    },
    /// A target parameter the target cannot use (not finite, out of its range, ...).
    #[error("{param}[{index}] = {} {why}", shown(*value))]
    InvalidParameter {
        /// The parameter's name (`mu`, `sigma`, `df`, ...).
        param: &'static str,
        /// The dimension.
        index: usize,
        /// Its value.
        value: f32,
        /// What is wrong with it.
        why: &'static str,
    },
    /// An initial state that is not finite.
    #[error("x[{row}, {coordinate}] = {value} is not finite")]
    NonFiniteState {
        /// The chain.
        row: usize,
        /// The coordinate.
        coordinate: usize,
        /// Its value.
        value: f32,
    },
    /// An initial state so far from the target that its log density overflows float32.
    #[error(
        "chain {row} is too far from mu: sum of ((x - mu) / sigma)^2 = {distance:e} overflows \
         float32 (at most {:e})",
        crate::limits::MAX_SQUARED_DISTANCE
    )]
    StateTooFar {
        /// The chain.
        row: usize,
        /// Its squared standardized distance from mu, computed in f64.
        distance: f64,
    },
    /// A step size that is not a positive finite number.
    #[error("step size {0} must be a finite number > 0")]
    BadStepSize(f32),
    /// A per-dimension proposal scale whose product with the step size is not a positive
    /// finite number.
    #[error(
        "proposal scale[{index}] = {scale} times the step size {step_size} must be a finite \
         number > 0"
    )]
    BadScale {
        /// The dimension.
        index: usize,
        /// Its scale.
        scale: f32,
        /// The step size it multiplies.
        step_size: f32,
    },
    /// A caller-supplied uniform outside `[0, 1)`.
    #[error("uniform[{index}] = {value} is outside [0, 1)")]
    UniformOutOfRange {
        /// Position of the first offending element.
        index: usize,
        /// Its value.
        value: f32,
    },
    /// A run plan that cannot run (no steps per launch, a thinning longer than the run).
    #[error("invalid run: {0}")]
    InvalidRun(String),
    /// A model's input that cannot be used ([`crate::model_inputs`]): which, and why.
    #[error("{}: {why}", input.name())]
    BadModelInput {
        /// The input.
        input: crate::model_inputs::Input,
        /// Why (without the input's name).
        why: String,
    },
    /// A callback of a run returned an error, and the run stopped (the callback's owner knows
    /// why: a trace file that could not be written, an interrupted job).
    #[error("the run was stopped by its caller")]
    Stopped,
    /// A host allocation that cannot be made.
    #[error("not enough host memory: could not allocate {bytes} bytes for {what}")]
    HostOutOfMemory {
        /// What the allocation was for.
        what: &'static str,
        /// Its size.
        bytes: usize,
    },
    /// The host's worker threads could not be started (most often: no memory for their stacks).
    #[error("cannot start the CPU worker threads ({0}): not enough memory or threads left")]
    NoThreads(String),
    /// Chains, target or noise that belong to different shapes.
    #[error("shape mismatch: {0}")]
    ShapeMismatch(String),
    /// The CUDA driver library could not be loaded: no NVIDIA driver on this machine.
    #[error("no CUDA driver: libcuda could not be loaded (is the NVIDIA driver installed?)")]
    NoDriver,
    /// The driver works but has no such device.
    #[error("no CUDA device {ordinal}: the driver reports {count} device(s)")]
    NoDevice {
        /// The device asked for.
        ordinal: usize,
        /// How many there are.
        count: usize,
    },
    /// The kernels' PTX target is newer than the device (e.g. `sm_80` kernels on a Volta GPU).
    #[error("the {target} kernels need a newer GPU: this one has compute capability {capability}")]
    PtxTooNew {
        /// The PTX target asked for.
        target: &'static str,
        /// The device's, as `10 * major + minor`.
        capability: u32,
    },
    /// The loaded PTX module lacks an entry point that the dispatcher chose (a build
    /// whose kernels and host disagree; a test checks they cannot).
    #[error("the loaded kernels have no entry point {0}")]
    MissingKernel(&'static str),
    /// An allocation the device could not satisfy.
    #[error("the GPU is out of memory: could not allocate {bytes} bytes for {what}")]
    OutOfMemory {
        /// What the allocation was for.
        what: &'static str,
        /// Its size.
        bytes: usize,
    },
    /// Any other error reported by the CUDA driver.
    #[error("CUDA driver error: {0}")]
    Driver(#[from] DriverError),
}

impl Error {
    /// The error of a failed device allocation of `bytes` for `what`: [`Error::OutOfMemory`]
    /// when the driver says so, else the driver's error.
    pub fn from_allocation(e: DriverError, what: &'static str, bytes: usize) -> Self {
        match e {
            DriverError(cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY) => {
                Error::OutOfMemory { what, bytes }
            }
            other => other.into(),
        }
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A float as a message shows it: plainly from 1e-4 to 1e6 (`-1`, `0.5`), in scientific
/// notation beyond (`1e20`), where the plain digits would run long.
fn shown(value: f32) -> String {
    if value == 0.0 || !value.is_finite() || (1e-4..1e6).contains(&value.abs()) {
        format!("{value}")
    } else {
        format!("{value:e}")
    }
}
