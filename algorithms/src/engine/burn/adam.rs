//! Adam's moments in the flat layout's order to and from burn's Adam record,
//! keyed by burn's parameter ids (the parameters themselves copy with
//! [`sebulba_core::model::flat`]): the burn engine's edge, where a
//! [`crate::engine::TrainState`] becomes burn's optimizer state and back.

use super::AdamRecord;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use burn_optim::record::AdaptorRecord;
use burn_optim::{AdamState, AdaptiveMomentumState};
use sebulba_core::model::ActorCritic;
use sebulba_core::model::flat::{Slot, floats, param_slots};
use sebulba_fused::net::Layout;

/// Floats in the flat vector the slots cover (the end of the last one).
fn flat_len(slots: &[Slot]) -> usize {
    slots
        .iter()
        .map(|s| s.tensor.at + s.tensor.len())
        .max()
        .unwrap_or(0)
}

/// One parameter's moments and step count from its record, by its rank.
fn moments<B: AutodiffBackend>(
    r: AdaptorRecord<burn_optim::Adam, B>,
    rank: usize,
) -> Result<(usize, Vec<f32>, Vec<f32>), String> {
    macro_rules! read {
        ($d:literal) => {{
            let s = r.into_state::<$d>().momentum;
            (
                s.time,
                floats(s.moment_1, "moment_1")?,
                floats(s.moment_2, "moment_2")?,
            )
        }};
    }
    Ok(match rank {
        1 => read!(1),
        2 => read!(2),
        4 => read!(4),
        _ => return Err(format!("a parameter of rank {rank}")),
    })
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
    for Slot { id, tensor } in slots {
        let Some(r) = record.remove(&id) else {
            continue;
        };
        let (t, a, b) = moments::<B>(r, tensor.shape.len())?;
        if a.len() != tensor.len() || b.len() != tensor.len() {
            return Err(format!(
                "Adam state of `{}` has the wrong size",
                tensor.name
            ));
        }
        time = time.max(t);
        tensor.scatter(&a, &mut m1);
        tensor.scatter(&b, &mut m2);
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
    let device = m.policy_head.weight.val().device();
    for Slot { id, tensor } in slots {
        let t = |v: &[f32]| TensorData::new(tensor.gather(v), tensor.shape.clone());
        macro_rules! state {
            ($d:literal) => {{
                let (a, b) = (
                    Tensor::<B::InnerBackend, $d>::from_data(t(m1), &device),
                    Tensor::<B::InnerBackend, $d>::from_data(t(m2), &device),
                );
                AdaptorRecord::from_state::<$d>(AdamState::new(AdaptiveMomentumState::new(
                    time, a, b,
                )))
            }};
        }
        let r = match tensor.shape.len() {
            1 => state!(1),
            2 => state!(2),
            4 => state!(4),
            rank => return Err(format!("a parameter of rank {rank}")),
        };
        record.insert(id, r);
    }
    Ok(record)
}
