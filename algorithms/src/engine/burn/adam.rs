//! Adam's moments in the flat layout's order to and from burn's Adam record,
//! keyed by burn's parameter ids (the parameters themselves copy with
//! [`sebulba_core::model::flat`]): the burn engine's edge, where a
//! [`crate::engine::TrainState`] becomes burn's optimizer state and back.

use super::AdamRecord;
use burn::module::ParamId;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use burn_optim::record::AdaptorRecord;
use burn_optim::{AdamState, AdaptiveMomentumState};
use sebulba_core::model::ActorCritic;
use sebulba_core::model::flat::{floats, param_slots};
use sebulba_fused::net::Layout;

/// Floats in the flat vector the slots cover (the end of the last one).
fn flat_len(slots: &[(ParamId, usize, Vec<usize>)]) -> usize {
    slots
        .iter()
        .map(|(_, at, shape)| at + shape.iter().product::<usize>())
        .max()
        .unwrap_or(0)
}

/// Adam's moments in the flat vector's order and its step count, from burn's
/// record; a parameter without state (no step taken yet) has zero moments.
/// burn counts steps per parameter and skips one without a gradient (DQN's
/// value head): the state's count is the largest, which every parameter that
/// steps has.
pub fn read_adam<B: AutodiffBackend>(
    layout: &Layout,
    m: &ActorCritic<B>,
    mut record: AdamRecord<B>,
) -> Result<(Vec<f32>, Vec<f32>, usize), String> {
    let slots = param_slots(layout, m)?;
    let len = flat_len(&slots);
    let (mut m1, mut m2) = (vec![0.0f32; len], vec![0.0f32; len]);
    let mut time = 0;
    for (id, at, shape) in slots {
        let Some(r) = record.remove(&id) else {
            continue;
        };
        let len: usize = shape.iter().product();
        let (t, a, b) = if shape.len() == 2 {
            let s = r.into_state::<2>().momentum;
            (
                s.time,
                floats(s.moment_1, "moment_1")?,
                floats(s.moment_2, "moment_2")?,
            )
        } else {
            let s = r.into_state::<1>().momentum;
            (
                s.time,
                floats(s.moment_1, "moment_1")?,
                floats(s.moment_2, "moment_2")?,
            )
        };
        if a.len() != len || b.len() != len {
            return Err(format!("Adam state of {id:?} has the wrong size"));
        }
        time = time.max(t);
        m1[at..at + len].copy_from_slice(&a);
        m2[at..at + len].copy_from_slice(&b);
    }
    Ok((m1, m2, time))
}

/// burn's Adam record for moments `m1`, `m2` after `time` steps (empty before the first).
pub fn write_adam<B: AutodiffBackend>(
    layout: &Layout,
    m: &ActorCritic<B>,
    m1: &[f32],
    m2: &[f32],
    time: usize,
) -> Result<AdamRecord<B>, String> {
    let mut record = AdamRecord::<B>::default();
    if time == 0 {
        return Ok(record);
    }
    let slots = param_slots(layout, m)?;
    let needed = flat_len(&slots);
    if m1.len() != needed || m2.len() != needed {
        return Err(format!(
            "moments of {} and {} values for a network of {needed}",
            m1.len(),
            m2.len()
        ));
    }
    for (id, at, shape) in slots {
        let len: usize = shape.iter().product();
        let device = m.policy_head.weight.val().device();
        let t = |v: &[f32]| TensorData::new(v[at..at + len].to_vec(), shape.clone());
        let r = if shape.len() == 2 {
            let (a, b) = (
                Tensor::from_data(t(m1), &device),
                Tensor::from_data(t(m2), &device),
            );
            AdaptorRecord::from_state::<2>(AdamState::new(AdaptiveMomentumState::new(time, a, b)))
        } else {
            let (a, b) = (
                Tensor::from_data(t(m1), &device),
                Tensor::from_data(t(m2), &device),
            );
            AdaptorRecord::from_state::<1>(AdamState::new(AdaptiveMomentumState::new(time, a, b)))
        };
        record.insert(id, r);
    }
    Ok(record)
}
