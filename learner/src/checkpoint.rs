//! Learner checkpoints: everything needed to go on as if the learner had never
//! stopped. The parameters and Adam's moments travel as flat little-endian f32
//! vectors in the network's layout order (`TrainState`, what either engine
//! loads); the counters, the f64 observation statistics and the reward-scale
//! state as JSON, then Adam's step count and the RNG seed. One file, written
//! atomically (write, then rename), so a learner killed mid-write leaves the
//! previous checkpoint intact. Every part carries its SHA-256, so a flipped bit
//! anywhere is refused, naming the part.

use sebulba_algorithms::engine::TrainState;
use sebulba_algorithms::reward_scale::RewardScaler;
use sebulba_algorithms::trainer::TrainerState;
use sebulba_core::config::NetworkConfig;
use sebulba_core::model::RunningMeanStd;
use sebulba_runfiles::files::write_atomic;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The checkpoint's name in the run directory.
pub const FILE: &str = "checkpoint.bin";
/// Format 4: each part is `len (u64 LE) | sha256 (32 bytes) | bytes`; the
/// parts are meta (JSON), parameters, Adam's first and second moments (f32 LE
/// each, in the layout's order, where the policy head's weight is an action
/// per row), Adam's step count and the RNG seed (u64 LE each). Format 3 was
/// the same with the policy head's weight `[d_in, d_out]`.
const MAGIC: &[u8; 8] = b"SEBCKPT4";

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a sebulba checkpoint or truncated ({what})")]
    Corrupt { path: PathBuf, what: String },
    #[error("{path}: part `{part}` is corrupt (its SHA-256 does not match)")]
    Checksum { path: PathBuf, part: &'static str },
    #[error("{path}: the counters do not serialise: {source}")]
    Encode {
        path: PathBuf,
        source: serde_json::Error,
    },
}

/// Where the run stands (updates, version, env steps) and learner-side
/// statistics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// The run this checkpoint belongs to.
    pub run_id: String,
    pub version: u64,
    pub env_steps: u64,
    pub updates: u64,
    pub env_id: String,
    pub network: NetworkConfig,
    /// The f64 statistics the model's f32 normaliser copies are made from.
    pub obs_stats: Option<RunningMeanStd>,
    pub reward_scale: Option<RewardScaler>,
    /// Wall time of the run up to this checkpoint, all segments together.
    pub wall_seconds: f64,
    /// The learner segments the run has had (1 before any resume).
    pub segments: u32,
    /// Batch accounting up to this checkpoint, overall and per actor.
    pub accounting: crate::accounting::Saved,
    /// The best and newest evaluations up to this checkpoint (a restarted
    /// param-server forgets them).
    #[serde(default)]
    pub evals: crate::evals::Scores,
}

#[derive(Clone, PartialEq)]
pub struct Checkpoint {
    pub meta: Meta,
    pub trainer: TrainerState,
}

fn le_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn put(out: &mut Vec<u8>, part: &[u8]) {
    use sha2::Digest;
    out.extend_from_slice(&(part.len() as u64).to_le_bytes());
    out.extend_from_slice(&sha2::Sha256::digest(part));
    out.extend_from_slice(part);
}

/// The next part of `bytes`, its checksum verified.
fn take<'a>(
    bytes: &mut &'a [u8],
    part: &'static str,
    path: &Path,
) -> Result<&'a [u8], CheckpointError> {
    use sha2::Digest;
    let corrupt = || CheckpointError::Corrupt {
        path: path.to_path_buf(),
        what: part.to_string(),
    };
    let (len, rest) = bytes.split_at_checked(8).ok_or_else(corrupt)?;
    let len = u64::from_le_bytes(len.try_into().map_err(|_| corrupt())?);
    let len = usize::try_from(len).map_err(|_| corrupt())?;
    let (sum, rest) = rest.split_at_checked(32).ok_or_else(corrupt)?;
    let (data, rest) = rest.split_at_checked(len).ok_or_else(corrupt)?;
    if sha2::Sha256::digest(data).as_slice() != sum {
        return Err(CheckpointError::Checksum {
            path: path.to_path_buf(),
            part,
        });
    }
    *bytes = rest;
    Ok(data)
}

impl Checkpoint {
    pub fn path(run_dir: &Path) -> PathBuf {
        run_dir.join(FILE)
    }

    pub fn encode(&self) -> Result<Vec<u8>, serde_json::Error> {
        let meta = serde_json::to_vec(&self.meta)?;
        let e = &self.trainer.state;
        let mut out = Vec::with_capacity(256 + meta.len() + 12 * e.params.len());
        out.extend_from_slice(MAGIC);
        put(&mut out, &meta);
        for v in [&e.params, &e.m1, &e.m2] {
            put(&mut out, &le_bytes(v));
        }
        put(&mut out, &(e.time as u64).to_le_bytes());
        put(&mut out, &self.trainer.rng_seed.to_le_bytes());
        Ok(out)
    }

    pub fn decode(mut bytes: &[u8], path: &Path) -> Result<Self, CheckpointError> {
        let corrupt = |what: &str| CheckpointError::Corrupt {
            path: path.to_path_buf(),
            what: what.to_string(),
        };
        if bytes.starts_with(b"SEBCKPT1") {
            return Err(corrupt(
                "magic: format 1, from a sebulba without checksums; start the run afresh",
            ));
        }
        if bytes.starts_with(b"SEBCKPT2") {
            return Err(corrupt(
                "magic: format 2 (burn records, written by sebulba up to commit 2c1b005); finish the run \
                 with the build that wrote it, or start afresh",
            ));
        }
        if bytes.starts_with(b"SEBCKPT3") {
            return Err(corrupt(
                "magic: format 3 (the policy head's weight in another order, written by sebulba up \
                 to commit cfca97e); finish the run with the build that wrote it, or start afresh",
            ));
        }
        bytes = bytes.strip_prefix(MAGIC).ok_or_else(|| corrupt("magic"))?;
        let meta = take(&mut bytes, "meta", path)?;
        let meta: Meta =
            serde_json::from_slice(meta).map_err(|e| corrupt(&format!("meta: {e}")))?;
        let mut floats = |part: &'static str| -> Result<Vec<f32>, CheckpointError> {
            let b = take(&mut bytes, part, path)?;
            if b.len() % 4 != 0 {
                return Err(corrupt(part));
            }
            Ok(b.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect())
        };
        let (params, m1, m2) = (floats("params")?, floats("adam m1")?, floats("adam m2")?);
        let mut word = |part: &'static str| -> Result<u64, CheckpointError> {
            let b: [u8; 8] = take(&mut bytes, part, path)?
                .try_into()
                .map_err(|_| corrupt(part))?;
            Ok(u64::from_le_bytes(b))
        };
        let time = usize::try_from(word("adam time")?).map_err(|_| corrupt("adam time"))?;
        let rng_seed = word("rng seed")?;
        if !bytes.is_empty() {
            return Err(corrupt("trailing bytes"));
        }
        Ok(Self {
            meta,
            trainer: TrainerState {
                state: TrainState {
                    params,
                    m1,
                    m2,
                    time,
                },
                rng_seed,
            },
        })
    }

    /// Writes `<run_dir>/checkpoint.bin` atomically.
    pub fn write(&self, run_dir: &Path) -> Result<(), CheckpointError> {
        let path = Self::path(run_dir);
        let bytes = self.encode().map_err(|source| CheckpointError::Encode {
            path: path.clone(),
            source,
        })?;
        write_atomic(&path, &bytes).map_err(|source| CheckpointError::Io { path, source })
    }

    /// The run directory's checkpoint, if it has one.
    pub fn read(run_dir: &Path) -> Result<Option<Self>, CheckpointError> {
        let path = Self::path(run_dir);
        match std::fs::read(&path) {
            Ok(bytes) => Self::decode(&bytes, &path).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(CheckpointError::Io { path, source }),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A checkpoint with every part set.
    pub(crate) fn sample() -> Checkpoint {
        let cfg = sebulba_core::config::RunConfig::preset("Pendulum-v1").expect("preset");
        let mut obs = RunningMeanStd::new(3);
        obs.update(&[0.1, 0.2, 0.3, 1.0, 2.0, 3.0]);
        Checkpoint {
            meta: Meta {
                run_id: "pendulum-test".into(),
                version: 7,
                env_steps: 12_345,
                updates: 6,
                env_id: "Pendulum-v1".into(),
                network: cfg.network,
                obs_stats: Some(obs),
                reward_scale: Some(RewardScaler::default()),
                wall_seconds: 12.5,
                segments: 2,
                accounting: Default::default(),
                evals: crate::evals::Scores {
                    best: Some(crate::evals::Score {
                        version: 5,
                        return_mean: -150.5,
                        matches: Vec::new(),
                        episodes: 7,
                        episodes_asked: 8,
                        cut_by: "max_steps".into(),
                    }),
                    latest: None,
                    cpu_seconds: 41.25,
                },
            },
            trainer: TrainerState {
                state: TrainState {
                    params: vec![1.0, -2.5, 3.25],
                    m1: vec![0.5, 0.0, -0.125],
                    m2: vec![0.25, 1e-9, 7.0],
                    time: 42,
                },
                rng_seed: 0xdead_beef,
            },
        }
    }

    #[test]
    fn a_checkpoint_round_trips_through_its_file() {
        let dir = std::env::temp_dir().join(format!("sebulba-ckpt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        assert!(Checkpoint::read(&dir).expect("read").is_none());
        let c = sample();
        c.write(&dir).expect("write");
        let back = Checkpoint::read(&dir).expect("read").expect("present");
        assert!(back == c);
        assert!(
            !dir.join("checkpoint.bin.tmp").exists(),
            "written by rename"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn truncated_or_foreign_files_are_refused_naming_the_part() {
        let bytes = sample().encode().expect("encode");
        let p = Path::new("x/checkpoint.bin");
        for cut in [0, 4, 12, bytes.len() - 9, bytes.len() - 1] {
            let e = Checkpoint::decode(&bytes[..cut], p).err().expect("refused");
            assert!(e.to_string().starts_with("x/checkpoint.bin"), "{e}");
        }
        let mut foreign = bytes.clone();
        foreign[0] = b'X';
        let e = Checkpoint::decode(&foreign, p).err().expect("refused");
        assert!(e.to_string().contains("magic"), "{e}");
        // A format-2 file (burn records) is refused with what to do.
        let mut old = bytes.clone();
        old[..8].copy_from_slice(b"SEBCKPT2");
        let e = Checkpoint::decode(&old, p).err().expect("refused");
        assert!(e.to_string().contains("format 2"), "{e}");
        // So is a format-3 file (the policy head's weight in burn's order).
        old[..8].copy_from_slice(b"SEBCKPT3");
        let e = Checkpoint::decode(&old, p).err().expect("refused");
        assert!(e.to_string().contains("format 3"), "{e}");
    }

    /// A flipped bit in any part's data is refused, naming that part.
    #[test]
    fn a_flipped_bit_is_refused_naming_its_part() {
        let c = sample();
        let bytes = c.encode().expect("encode");
        let meta_len = serde_json::to_vec(&c.meta).expect("meta").len();
        // Offsets of the first data byte of each part.
        let head = 8 + 32;
        let meta_at = 8 + head;
        let params_at = meta_at + meta_len + head;
        let m1_at = params_at + 12 + head;
        let m2_at = m1_at + 12 + head;
        let time_at = m2_at + 12 + head;
        let seed_at = time_at + 8 + head;
        let p = Path::new("x/checkpoint.bin");
        for (at, part) in [
            (meta_at + 5, "meta"),
            (params_at + 1, "params"),
            (m1_at, "adam m1"),
            (m2_at + 11, "adam m2"),
            (time_at + 3, "adam time"),
            (seed_at + 7, "rng seed"),
        ] {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x10;
            match Checkpoint::decode(&flipped, p) {
                Err(CheckpointError::Checksum { part: got, .. }) => assert_eq!(got, part),
                other => panic!("{part}: {:?}", other.err()),
            }
        }
        assert_eq!(seed_at + 8, bytes.len());
    }
}
