//! Models with data: log-densities that couple a state's dimensions through a data set (a
//! regression's likelihood), where [`crate::target`] holds the densities that separate over
//! dimensions.
//!
//! A model's state is its parameters on the unconstrained scale (a scale parameter as its
//! log, with the Jacobian in the density), and a model gives what a Metropolis–Hastings step
//! needs: `-2 log alpha = -2 (log pi(p) - log pi(x))` for a state `x` and a proposal `p`,
//! computed as a sum of per-data-row *differences* (as the Gaussian target forms its terms),
//! never as the difference of two large sums: a log-likelihood over 10^5 rows is of order
//! 10^5, and float32 would keep only a few units of the difference of two such numbers.
//!
//! # One formula on both machines
//!
//! [`Model`] splits `-2 log alpha` into what a step computes once per state pair
//! ([`Model::prepare`]), the terms of the data rows ([`Model::add_rows`]) and the rest
//! ([`Model::finish`]: the priors, the Jacobian). The data rows are summed in the order a warp
//! sums them: row `n` into the partial sum of lane `n % 32`, in order of `n`, the lanes'
//! partials by a butterfly ([`crate::mh::group_sum_emulated`] on the CPU). The CPU reference calls
//! [`Model::minus_two_log_alpha`]; the GPU's kernel (`gpu::model_steps`) gives each lane its
//! rows and shuffles the partials, in the same order, so the two agree to the bit for equal
//! states — except the logistic regression, whose rows use the GPU's special function unit
//! (within about 1e-6 a row, [`logreg`]).
//!
//! # A model in device memory
//!
//! Each model is a `repr(C)` struct whose data are [`Array`]s: the host copies the struct's
//! bytes into device memory with each array's address replaced by its device copy's
//! ([`Model::for_each_array`]), and the kernel reads the model through a pointer to that copy.

use core::marker::PhantomData;

pub mod dense_gaussian;
pub mod hier_normal;
pub mod linreg;
pub mod logreg;
pub mod priors;
pub mod row_groups;

pub use dense_gaussian::{DenseGaussian, DenseGaussianError, Factor, whitening};
pub use hier_normal::HierarchicalNormal;
pub use linreg::{LinearRegression, RegressionError};
pub use logreg::LogisticRegression;
pub use priors::{CoefficientPrior, ScalePrior};

use crate::mh::group_sum_emulated;

/// A model: the unconstrained dimension of its states, `-2 log alpha` between two states in
/// three parts (see the module documentation), and the map back to the parameters' own scale.
pub trait Model {
    /// What [`Model::prepare`] computes once per state pair for every row (a few scalars).
    type Move: Copy;

    /// Its run-time name, and the name of its kernel.
    const KIND: ModelKind;

    /// The parameters of a state (its length).
    fn dim(&self) -> usize;

    /// What every row's term needs from states `x` and `p` beyond their elements.
    fn prepare(&self, x: &[f32], p: &[f32]) -> Self::Move;

    /// `sum` plus the shares of `-2 log alpha` of data rows `first`, `first + DATA_LANES`, ...
    /// (one lane's rows), added in that order. The regressions walk their rows in groups
    /// ([`row_groups`]), the others with [`LaneRows`]: no bounds check is left in the loop and
    /// the model's fields are read once.
    fn add_rows(&self, sum: f32, first: usize, x: &[f32], p: &[f32], m: &Self::Move) -> f32;

    /// `-2 log alpha` from the rows' total `data`: plus the priors' and the Jacobians' terms.
    fn finish(&self, data: f32, x: &[f32], p: &[f32], m: &Self::Move) -> f32;

    /// `-2 (log pi(p) - log pi(x))` for states `x` and `p` of [`Model::dim`] elements
    /// (unconstrained), in float32, rows summed in a warp's order. NaN or infinite where
    /// either state is (the step then rejects).
    fn minus_two_log_alpha(&self, x: &[f32], p: &[f32]) -> f32 {
        let m = self.prepare(x, p);
        let partial: [f32; DATA_LANES] =
            core::array::from_fn(|lane| self.add_rows(0.0, lane, x, p, &m));
        self.finish(group_sum_emulated(&partial), x, p, &m)
    }

    /// The parameters on their own scale (a scale as `exp` of its log) from a state, into
    /// `out` ([`Model::dim`] long).
    fn constrain(&self, v: &[f32], out: &mut [f32]);

    /// Calls `f` with each of the model's arrays, in a fixed order (see the module
    /// documentation).
    fn for_each_array(&mut self, f: &mut dyn FnMut(&mut Array<'_>));
}

/// Lanes whose partial sums a model's data rows go into (a warp).
pub const DATA_LANES: usize = crate::layout::WARP_SIZE;

/// One lane's rows of a row-major `[rows, width]` array: rows `first`, `first + DATA_LANES`,
/// ... as slices, for [`Model::add_rows`]. A row is taken by `get` and the rest moves on by a
/// slice's `get`, so the loop has no panicking bounds check and no multiplication (the
/// standard `step_by` over a `zip` of `chunks_exact` walks every skipped row on the GPU).
#[derive(Clone, Debug)]
pub struct LaneRows<'a> {
    rest: &'a [f32],
    width: usize,
}

impl<'a> LaneRows<'a> {
    /// Lane `first`'s rows of `values`, `width` to a row.
    #[inline(always)]
    pub fn new(values: &'a [f32], width: usize, first: usize) -> Self {
        Self {
            rest: values.get(first * width..).unwrap_or(&[]),
            width,
        }
    }
}

impl<'a> Iterator for LaneRows<'a> {
    type Item = &'a [f32];

    #[inline(always)]
    fn next(&mut self) -> Option<&'a [f32]> {
        let row = self.rest.get(..self.width)?;
        self.rest = self.rest.get(self.width * DATA_LANES..).unwrap_or(&[]);
        Some(row)
    }
}

/// One lane's elements of `values`: elements `first`, `first + DATA_LANES`, ... (a
/// [`LaneRows`] of width 1).
#[inline(always)]
pub fn lane_values(values: &[f32], first: usize) -> impl Iterator<Item = f32> + '_ {
    LaneRows::new(values, 1, first).map(|v| v[0])
}

/// A borrowed `f32` array with a layout fixed by `repr(C)` (an address and a length), so that
/// a model holding it can be copied into device memory (see the module documentation).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Array<'a> {
    ptr: *const f32,
    len: usize,
    borrow: PhantomData<&'a [f32]>,
}

// SAFETY: an `Array` is a shared borrow of `f32`s, which may be read from any thread.
unsafe impl Sync for Array<'_> {}
// SAFETY: as above.
unsafe impl Send for Array<'_> {}

impl<'a> Array<'a> {
    /// The array of `values`.
    pub fn new(values: &'a [f32]) -> Self {
        Self {
            ptr: values.as_ptr(),
            len: values.len(),
            borrow: PhantomData,
        }
    }

    /// Its values.
    #[inline(always)]
    pub fn get(&self) -> &'a [f32] {
        // SAFETY: `ptr` and `len` come from a slice borrowed for `'a` ([`Array::new`]) or, for a
        // relocated array, from a device buffer read only on the device ([`Array::relocate`]).
        unsafe { core::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// Its length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Points the array at `address` (a device copy of its values, as long).
    ///
    /// # Safety
    /// The model holding it must afterwards only be copied as bytes to the device: [`Array::get`]
    /// on the host would read an address that is not the host's.
    pub unsafe fn relocate(&mut self, address: u64) {
        self.ptr = address as *const f32;
    }
}

/// The proposal `p = x + step_size * L eps` of a dense random walk, `L` the `[dim, dim]`
/// lower-triangular factor (row-major; the entries above the diagonal are not read): element
/// `i` adds `L[i, j] eps[j]` for `j <= i` in order, by fused multiply-adds, then one more for
/// the step size. `x`, `eps` and `p` have `dim` elements.
#[inline]
pub fn propose_dense(x: &[f32], eps: &[f32], (factor, step_size): (&[f32], f32), p: &mut [f32]) {
    for (i, (p_i, &x_i)) in p.iter_mut().zip(x).enumerate() {
        *p_i = propose_element(i, x_i, eps, (factor, step_size));
    }
}

/// Element `i` of [`propose_dense`]: `x_i + step_size * sum_{j <= i} L[i, j] eps[j]`. NaN
/// (which a step rejects) where `i` is not below `eps.len()` or the factor is shorter than
/// `eps.len()^2`.
///
/// The one length check comes first and the loop reads unchecked, with a 32-bit counter
/// (states have at most [`MAX_MODEL_DIM`] elements): a `zip` of two checked slices costs the
/// GPU 64-bit trip-count arithmetic for every element.
#[inline(always)]
pub fn propose_element(i: usize, x_i: f32, eps: &[f32], (factor, step_size): (&[f32], f32)) -> f32 {
    let dim = eps.len();
    if i >= dim || dim > MAX_MODEL_DIM || factor.len() < dim * dim {
        return f32::NAN;
    }
    let (row, i) = (i * dim, i as u32);
    let mut move_i = 0.0f32;
    for j in 0..=i {
        // SAFETY: `j <= i < dim`, so `row + j < dim^2 <= factor.len()` and `j < eps.len()`.
        let (l, e) = unsafe {
            (
                *factor.get_unchecked(row + j as usize),
                *eps.get_unchecked(j as usize),
            )
        };
        move_i = crate::math::fma(l, e, move_i);
    }
    crate::math::fma(step_size, move_i, x_i)
}

/// The largest state a model run takes (the proposal's factor is `[dim, dim]`; the GPU holds a
/// chain's state, proposal and normals in shared memory).
pub const MAX_MODEL_DIM: usize = 256;

/// Warps per block of the model kernel: each warp has its own slice of the block's shared
/// memory for the chain it is stepping.
pub const MODEL_WARPS_PER_BLOCK: usize = 4;

/// The `f64`s of one warp's warm-up window sums for states of `dim` elements: the sum of the
/// states `[dim]`, the sum of their products `[dim, dim]` and the sum over chains of the
/// products of each chain's sum over the window `[dim, dim]` (lower triangles filled; the host
/// adds the warps' sums up).
pub const fn window_sums_len(dim: usize) -> usize {
    dim + 2 * dim * dim
}

/// Declares the models: the run-time [`ModelKind`] with one variant per model type, and on the
/// GPU each model's kernel (`gpu::model_steps`) under the name [`ModelKind::entry_point`].
/// Invoked once, below; each line is `module_name "cli-name": Type`.
#[macro_export]
#[doc(hidden)]
macro_rules! declare_models {
    ($($(#[$doc:meta])* $suffix:ident $name:literal: $model:ident),* $(,)?) => {
        /// A model chosen at run time: one variant per [`Model`] type.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ModelKind {
            $($(#[$doc])* $model),*
        }

        impl ModelKind {
            /// Every model, in declaration order.
            pub const ALL: &'static [ModelKind] = &[$(ModelKind::$model),*];

            /// Its name, as the command line's `--target` takes it.
            pub fn name(self) -> &'static str {
                match self { $(ModelKind::$model => $name),* }
            }

            /// The name of its model kernel's entry point.
            pub fn entry_point(self) -> &'static str {
                match self {
                    $(ModelKind::$model => concat!("mh_model_steps_", stringify!($suffix))),*
                }
            }

            /// The model called `name`, if any.
            pub fn from_name(name: &str) -> Option<ModelKind> {
                Self::ALL.iter().copied().find(|kind| kind.name() == name)
            }
        }

        /// The model kernels' entry points, a module per model.
        #[cfg(target_arch = "nvptx64")]
        #[doc(hidden)]
        pub mod entry_points {
        $(
            /// This model's kernel.
            pub mod $suffix {
                /// Steps every chain of the model (see `gpu::model_steps`).
                ///
                /// # Safety
                /// See `gpu::model_steps::model_steps`.
                #[allow(clippy::too_many_arguments)]
                #[unsafe(export_name = concat!("mh_model_steps_", stringify!($suffix)))]
                pub unsafe extern "ptx-kernel" fn model_steps(
                    model: *const super::super::$model<'static>,
                    states: *mut f32,
                    chains: u64,
                    factor: *const f32,
                    step_sizes: *const f32,
                    seed: u64,
                    first_step: u64,
                    steps: u32,
                    accepted: *mut u32,
                    sums: *mut f64,
                    trace: *mut f32,
                    thin: u32,
                    trace_first_step: u64,
                ) {
                    let launch = $crate::gpu::model_steps::ModelLaunch {
                        states, chains: chains as usize, factor, step_sizes, seed, first_step,
                        steps, accepted, sums, trace, thin, trace_first_step,
                    };
                    // SAFETY: forwarded from this function's contract.
                    unsafe { $crate::gpu::model_steps::model_steps(&*model, &launch) }
                }
            }
        )*
        }
    };
}

declare_models! {
    /// [`LinearRegression`].
    linreg "linreg": LinearRegression,
    /// [`LogisticRegression`].
    logreg "logreg": LogisticRegression,
    /// [`HierarchicalNormal`].
    hier_normal "hier-normal": HierarchicalNormal,
    /// [`DenseGaussian`].
    dense_gaussian "dense-gaussian": DenseGaussian,
}
