//! DLPack in both directions: the checks on a tensor another framework lends (device, dtype,
//! shape, C order; [`borrow`]), and the arrays this package lends out ([`Exported`], for JAX,
//! which lends no writable memory), over [`dlpark`]'s managed tensors.

use dlpark::SafeManagedTensor;
use dlpark::ffi::{DataTypeCode, DeviceType};
use dlpark::prelude::TensorView;
use dlpark::traits::{RowMajorCompactLayout, TensorLike};
use fused_mh::borrowed::Borrowed;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

/// What a tensor must be: its role (for messages), its element type, and its shape (`None`:
/// any size in that dimension).
pub(crate) struct Expect<'a> {
    pub(crate) what: &'a str,
    pub(crate) dtype: &'a [(DataTypeCode, u8)],
    pub(crate) dtype_name: &'a str,
    pub(crate) shape: &'a [Option<usize>],
}

/// The tensor in a DLPack capsule, checked against `expect` and the device: the owner (keep it
/// until the launch is queued), its shape and its address.
pub(crate) fn borrow(
    capsule: &Bound<'_, PyAny>,
    expect: &Expect<'_>,
    ordinal: usize,
) -> PyResult<(SafeManagedTensor, Vec<usize>, Borrowed)> {
    let what = expect.what;
    let is_dltensor = capsule
        .cast::<PyCapsule>()
        .ok()
        .and_then(|c| c.name().ok().flatten())
        // SAFETY: the name of a live capsule, read at once (a capsule's name outlives it).
        .map(|n| unsafe { n.as_cstr() }.to_bytes() == b"dltensor")
        .unwrap_or(false);
    if !is_dltensor {
        return Err(PyTypeError::new_err(format!(
            "{what}: expected an unused DLPack capsule (tensor.__dlpack__())"
        )));
    }
    let tensor: SafeManagedTensor = capsule.extract()?;
    let device = tensor.device();
    if device.device_type != DeviceType::Cuda || device.device_id as usize != ordinal {
        return Err(PyValueError::new_err(format!(
            "{what} is on {:?} {}, the step runs on CUDA device {ordinal}",
            device.device_type, device.device_id
        )));
    }
    let dtype = tensor.data_type();
    if dtype.lanes != 1 || !expect.dtype.contains(&(dtype.code, dtype.bits)) {
        return Err(PyTypeError::new_err(format!(
            "{what} has dtype {:?}{}, the step needs {}",
            dtype.code, dtype.bits, expect.dtype_name
        )));
    }
    let shape: Vec<usize> = tensor.shape().iter().map(|&n| n as usize).collect();
    let fits = shape.len() == expect.shape.len()
        && shape
            .iter()
            .zip(expect.shape)
            .all(|(&n, e)| e.is_none_or(|e| e == n));
    if !fits {
        let want: Vec<String> = expect
            .shape
            .iter()
            .map(|e| e.map_or("any".to_string(), |n| n.to_string()))
            .collect();
        return Err(PyValueError::new_err(format!(
            "{what} has shape {shape:?}, the step needs [{}]",
            want.join(", ")
        )));
    }
    if let Some(strides) = tensor.strides() {
        // C order: the last stride 1, each one before it the product of the sizes after it
        // (sizes of 1 may carry any stride).
        let mut want = 1i64;
        for (&s, &n) in strides.iter().zip(&shape).rev() {
            if n > 1 && s != want {
                return Err(PyValueError::new_err(format!(
                    "{what} is not contiguous (strides {strides:?}): pass {what}.contiguous()"
                )));
            }
            want *= n as i64;
        }
    }
    let ptr = tensor.data_ptr() as u64 + tensor.byte_offset() as u64;
    let len = shape.iter().product();
    Ok((tensor, shape, Borrowed { ptr, len }))
}

pub(crate) const F32: &[(DataTypeCode, u8)] = &[(DataTypeCode::Float, 32)];

impl<'a> Expect<'a> {
    /// A float32 tensor of `shape`.
    pub(crate) fn f32(what: &'a str, shape: &'a [Option<usize>]) -> Self {
        Expect {
            what,
            dtype: F32,
            dtype_name: "float32",
            shape,
        }
    }
}
pub(crate) const FLAGS: &[(DataTypeCode, u8)] = &[(DataTypeCode::Bool, 8), (DataTypeCode::UInt, 8)];

/// Device memory this package allocated for an output, as DLPack describes it.
pub(crate) struct OwnedBuffer {
    pub(crate) ptr: u64,
    /// What frees the memory when dropped (a `CudaSlice`).
    pub(crate) _owner: Box<dyn std::any::Any>,
    pub(crate) shape: Vec<i64>,
    pub(crate) dtype: dlpark::ffi::DataType,
    pub(crate) ordinal: usize,
}

impl TensorLike<RowMajorCompactLayout> for OwnedBuffer {
    type Error = dlpark::Error;
    fn data_ptr(&self) -> *mut std::ffi::c_void {
        self.ptr as *mut _
    }
    fn memory_layout(&self) -> RowMajorCompactLayout {
        RowMajorCompactLayout::new(self.shape.clone())
    }
    fn device(&self) -> Result<dlpark::ffi::Device, Self::Error> {
        Ok(dlpark::ffi::Device::cuda(self.ordinal))
    }
    fn data_type(&self) -> Result<dlpark::ffi::DataType, Self::Error> {
        Ok(self.dtype)
    }
    fn byte_offset(&self) -> u64 {
        0
    }
}

/// An output array of `Device.step_to_new` or `Device.run` ([`crate::gpu::Device`]), for
/// `jax.dlpack.from_dlpack` or `torch.from_dlpack` (any DLPack consumer): `__dlpack__` hands
/// its memory over once; the consumer's deleter frees it.
#[pyclass(unsendable)]
pub struct Exported {
    tensor: std::cell::RefCell<Option<SafeManagedTensor>>,
    ordinal: usize,
    /// The device address of the memory (for a test that the consumer did not copy it).
    #[pyo3(get)]
    ptr: u64,
}

impl Exported {
    pub(crate) fn new(buffer: OwnedBuffer) -> PyResult<Self> {
        let (ordinal, ptr) = (buffer.ordinal, buffer.ptr);
        let tensor = SafeManagedTensor::new(buffer)
            .map_err(|e| PyValueError::new_err(format!("DLPack export: {e}")))?;
        Ok(Self {
            tensor: std::cell::RefCell::new(Some(tensor)),
            ordinal,
            ptr,
        })
    }
}

#[pymethods]
impl Exported {
    /// The DLPack capsule (once; the memory is complete already, so `stream` asks nothing).
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<Bound<'py, PyAny>>,
        max_version: Option<Bound<'py, PyAny>>,
        dl_device: Option<Bound<'py, PyAny>>,
        copy: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = (stream, max_version, dl_device, copy);
        let tensor = self.tensor.borrow_mut().take().ok_or_else(|| {
            pyo3::exceptions::PyBufferError::new_err("this array was handed over already")
        })?;
        tensor.into_pyobject(py)
    }

    /// `(kDLCUDA, ordinal)`.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (DeviceType::Cuda as i32, self.ordinal as i32)
    }
}
