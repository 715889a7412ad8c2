//! One-step Q-learning targets (Mnih et al. 2015):
//! `y = r + γ (1 - done) max_a' Q_target(s', a')`, where `done` is
//! termination only (a truncated step bootstraps from the true final
//! observation). The loss on `Q(s, a) - y` is the engines' (`Loss::Q`).

/// Targets of `rewards[i]` with next-state Q-rows `next_q` (`[n * actions]`,
/// from the target network).
pub fn td_targets(
    rewards: &[f32],
    terminated: &[u8],
    next_q: &[f32],
    actions: usize,
    gamma: f64,
) -> Vec<f32> {
    rewards
        .iter()
        .zip(terminated)
        .zip(next_q.chunks_exact(actions.max(1)))
        .map(|((&r, &done), q)| {
            if done != 0 {
                return r;
            }
            let max = q.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
            (r as f64 + gamma * max) as f32
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_bootstrap_unless_terminated() {
        // Two actions; gamma 0.9.
        let y = td_targets(
            &[-1.0, -1.0, 2.0],
            &[0, 1, 0],
            &[3.0, 5.0, 100.0, 100.0, -4.0, -6.0],
            2,
            0.9,
        );
        // -1 + 0.9 * 5 = 3.5; terminated: -1 alone; 2 + 0.9 * -4 = -1.6.
        let want = [3.5f32, -1.0, -1.6];
        for (a, b) in y.iter().zip(want) {
            assert!((a - b).abs() < 1e-6, "{y:?}");
        }
    }
}
