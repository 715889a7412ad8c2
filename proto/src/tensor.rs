//! Packed little-endian tensors: encode from slices, decode with the field name
//! in every error so a bad batch says exactly what was wrong.

use crate::pb::{DType, Tensor};
use prost::bytes::Bytes;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TensorError {
    #[error("field `{field}` is missing")]
    Missing { field: String },
    #[error("field `{field}`: dtype {}, expected {}", dtype_name(*got), dtype_name(*expected as i32))]
    DType {
        field: String,
        got: i32,
        expected: DType,
    },
    #[error("field `{field}`: shape {got:?}, expected {expected:?}")]
    Shape {
        field: String,
        got: Vec<u32>,
        expected: Vec<u32>,
    },
    #[error("field `{field}`: {got} data bytes, shape {shape:?} needs {needed}")]
    Length {
        field: String,
        got: usize,
        shape: Vec<u32>,
        needed: usize,
    },
}

/// A dtype as the wire names it (`f32`, `i32`, `u8`), or its number when
/// the wire does not know it.
fn dtype_name(dtype: i32) -> String {
    match DType::try_from(dtype) {
        Ok(DType::DtypeF32) => "f32".into(),
        Ok(DType::DtypeI32) => "i32".into(),
        Ok(DType::DtypeU8) => "u8".into(),
        Err(_) => format!("{dtype} (unknown)"),
    }
}

fn encode(shape: &[usize], dtype: DType, data: Vec<u8>) -> Tensor {
    Tensor {
        shape: shape.iter().map(|&d| d as u32).collect(),
        dtype: dtype as i32,
        data: Bytes::from(data),
    }
}

pub fn encode_f32(shape: &[usize], values: &[f32]) -> Tensor {
    debug_assert_eq!(shape.iter().product::<usize>(), values.len());
    let mut data = Vec::with_capacity(values.len() * 4);
    for v in values {
        data.extend_from_slice(&v.to_le_bytes());
    }
    encode(shape, DType::DtypeF32, data)
}

pub fn encode_i32(shape: &[usize], values: &[i32]) -> Tensor {
    debug_assert_eq!(shape.iter().product::<usize>(), values.len());
    let mut data = Vec::with_capacity(values.len() * 4);
    for v in values {
        data.extend_from_slice(&v.to_le_bytes());
    }
    encode(shape, DType::DtypeI32, data)
}

pub fn encode_u8(shape: &[usize], values: &[u8]) -> Tensor {
    debug_assert_eq!(shape.iter().product::<usize>(), values.len());
    encode(shape, DType::DtypeU8, values.to_vec())
}

/// Checks presence, dtype, the expected shape and the byte length.
fn check<'a>(
    t: Option<&'a Tensor>,
    field: &str,
    dtype: DType,
    shape: &[u32],
    elem: usize,
) -> Result<&'a [u8], TensorError> {
    let t = t.ok_or_else(|| TensorError::Missing {
        field: field.into(),
    })?;
    if t.dtype != dtype as i32 {
        return Err(TensorError::DType {
            field: field.into(),
            got: t.dtype,
            expected: dtype,
        });
    }
    if t.shape != shape {
        return Err(TensorError::Shape {
            field: field.into(),
            got: t.shape.clone(),
            expected: shape.to_vec(),
        });
    }
    let needed = shape.iter().map(|&d| d as usize).product::<usize>() * elem;
    if t.data.len() != needed {
        return Err(TensorError::Length {
            field: field.into(),
            got: t.data.len(),
            shape: t.shape.clone(),
            needed,
        });
    }
    Ok(&t.data)
}

/// Decodes an f32 tensor of exactly `shape`.
pub fn decode_f32(t: Option<&Tensor>, field: &str, shape: &[u32]) -> Result<Vec<f32>, TensorError> {
    let data = check(t, field, DType::DtypeF32, shape, 4)?;
    Ok(data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Decodes an i32 tensor of exactly `shape`.
pub fn decode_i32(t: Option<&Tensor>, field: &str, shape: &[u32]) -> Result<Vec<i32>, TensorError> {
    let data = check(t, field, DType::DtypeI32, shape, 4)?;
    Ok(data
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Decodes a u8 tensor of exactly `shape`.
pub fn decode_u8(t: Option<&Tensor>, field: &str, shape: &[u32]) -> Result<Vec<u8>, TensorError> {
    Ok(check(t, field, DType::DtypeU8, shape, 1)?.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f32_round_trip_is_little_endian_and_exact() {
        let v = [1.0f32, -2.5, f32::MIN_POSITIVE, 3.25e7, 0.1, -0.0];
        let t = encode_f32(&[2, 3], &v);
        assert_eq!(&t.data[0..4], &1.0f32.to_le_bytes());
        let back = decode_f32(Some(&t), "x", &[2, 3]).unwrap();
        assert_eq!(
            back.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn errors_name_the_field() {
        let t = encode_f32(&[2, 3], &[0.0; 6]);
        let e = decode_f32(Some(&t), "rewards", &[3, 2]).unwrap_err();
        assert!(e.to_string().contains("`rewards`"), "{e}");
        assert!(matches!(e, TensorError::Shape { .. }));
        let e = decode_i32(Some(&t), "actions", &[2, 3]).unwrap_err();
        assert!(matches!(e, TensorError::DType { .. }), "{e}");
        assert!(e.to_string().ends_with("dtype f32, expected i32"), "{e}");
        let e = decode_u8(None, "terminated", &[1]).unwrap_err();
        assert_eq!(e.to_string(), "field `terminated` is missing");
        let mut short = t.clone();
        short.data = short.data.slice(0..20);
        let e = decode_f32(Some(&short), "observations", &[2, 3]).unwrap_err();
        assert!(
            matches!(
                e,
                TensorError::Length {
                    got: 20,
                    needed: 24,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn i32_and_u8_round_trip() {
        let t = encode_i32(&[3], &[-1, 0, 7]);
        assert_eq!(decode_i32(Some(&t), "a", &[3]).unwrap(), vec![-1, 0, 7]);
        let t = encode_u8(&[2], &[0, 1]);
        assert_eq!(decode_u8(Some(&t), "m", &[2]).unwrap(), vec![0, 1]);
    }
}
