//! Which instruction set the kernels run on: the widest the CPU has, or the
//! one `SEBULBA_KERNELS` names. Paths differ in the order they sum in (the
//! AVX-512 matrix blocks against matrixmultiply's), so two machines give the
//! same bits only on the same path: forcing one makes runs comparable, and
//! lets every path be tested on a CPU that has it.

use std::sync::atomic::{AtomicU8, Ordering};

/// The environment variable that forces a path: `auto` (the default),
/// `scalar`, `avx2` or `avx512`.
pub const VARIABLE: &str = "SEBULBA_KERNELS";

/// An instruction-set path of the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// The portable build (SSE2 on x86-64) and matrixmultiply (which picks
    /// its own kernel from the CPU, AVX-512 ones included). Its tanh takes
    /// libm's `fmaf` for each fused multiply-add, the same bits as the other
    /// paths but about 19 times slower than the SSE2 multiply-and-add it
    /// was (48 ns an element here); on aarch64 the same code is one
    /// instruction per step.
    Scalar,
    /// Element-wise loops compiled for AVX2 with FMA; every product in our
    /// AVX2 blocks (the larger ones packed, `tiled`, in matrixmultiply's
    /// slices of the inner dimension); stride-1 convolutions of the IMPALA
    /// ResNet's shapes summed directly (`direct_conv`). Nothing wider runs
    /// on it, so forced on an AVX-512 CPU it stands in for an AVX2 one.
    Avx2,
    /// Element-wise loops compiled for AVX-512F; small products in our
    /// AVX-512 blocks (and, in matrixmultiply's slices, the longer ones it
    /// would take with a narrow right operand), row-major ones with a long
    /// inner dimension in the `gemm` crate's AVX-512 kernels, the rest in
    /// matrixmultiply's AVX-512 kernels (measured the faster choice there);
    /// stride-1 convolutions of the IMPALA ResNet's shapes summed directly
    /// (`direct_conv`).
    Avx512,
}

/// A `SEBULBA_KERNELS` value that names no path, or one this CPU lacks.
#[derive(Debug, thiserror::Error)]
pub enum KernelsError {
    #[error("{VARIABLE}={0:?}: expected auto, scalar, avx2 or avx512")]
    Unknown(String),
    #[error("{VARIABLE}={}: this CPU lacks it (it has {})", .0.name(), Isa::widest().name())]
    Unsupported(Isa),
}

impl Isa {
    /// Every path, narrowest first.
    pub const ALL: [Isa; 3] = [Isa::Scalar, Isa::Avx2, Isa::Avx512];

    /// The name `SEBULBA_KERNELS` takes and logs show.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// `Some(path)`, or `None` for `auto`.
    pub fn parse(value: &str) -> Result<Option<Isa>, KernelsError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(None),
            name => Isa::ALL
                .into_iter()
                .find(|isa| isa.name() == name)
                .map(Some)
                .ok_or_else(|| KernelsError::Unknown(value.to_string())),
        }
    }

    /// Whether this CPU can run the path.
    pub fn supported(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            match self {
                Isa::Scalar => true,
                Isa::Avx2 => {
                    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
                }
                Isa::Avx512 => std::is_x86_feature_detected!("avx512f"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self == Isa::Scalar
        }
    }

    /// The widest path this CPU has (what `auto` picks).
    pub fn widest() -> Isa {
        Isa::ALL
            .into_iter()
            .rev()
            .find(|isa| isa.supported())
            .unwrap_or(Isa::Scalar)
    }

    fn code(self) -> u8 {
        self as u8 + 1
    }

    fn of_code(code: u8) -> Option<Isa> {
        Isa::ALL.get(usize::from(code).checked_sub(1)?).copied()
    }
}

/// The process's path; 0 until chosen.
static ACTIVE: AtomicU8 = AtomicU8::new(0);

/// The path `SEBULBA_KERNELS` asks for (the widest the CPU has when unset or
/// `auto`), made the process's path. The binary calls this at start so that
/// a bad value is refused before anything runs.
pub fn select_from_env() -> Result<Isa, KernelsError> {
    let asked = match std::env::var(VARIABLE) {
        Ok(value) => Isa::parse(&value)?,
        Err(_) => None,
    };
    let isa = match asked {
        Some(isa) if !isa.supported() => return Err(KernelsError::Unsupported(isa)),
        Some(isa) => isa,
        None => Isa::widest(),
    };
    ACTIVE.store(isa.code(), Ordering::Relaxed);
    Ok(isa)
}

/// The process's path, chosen from `SEBULBA_KERNELS` on first use.
///
/// # Panics
/// On first use, when the variable names no path or one this CPU lacks
/// (the binary refuses such a value at start with [`select_from_env`], so
/// only a library user or a test run meets this).
#[inline]
pub fn active() -> Isa {
    match Isa::of_code(ACTIVE.load(Ordering::Relaxed)) {
        Some(isa) => isa,
        None => select_from_env().unwrap_or_else(|e| panic!("{e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_auto_is_none() {
        for isa in Isa::ALL {
            assert_eq!(Isa::parse(isa.name()).expect("parses"), Some(isa));
            assert_eq!(Isa::of_code(isa.code()), Some(isa));
        }
        assert_eq!(Isa::parse("auto").expect("parses"), None);
        assert_eq!(Isa::parse(" AVX2 ").expect("parses"), Some(Isa::Avx2));
        assert_eq!(Isa::of_code(0), None);
        let e = Isa::parse("avx3").expect_err("refused");
        assert_eq!(
            e.to_string(),
            "SEBULBA_KERNELS=\"avx3\": expected auto, scalar, avx2 or avx512"
        );
    }

    #[test]
    fn the_widest_path_is_supported_and_scalar_always_is() {
        assert!(Isa::Scalar.supported());
        assert!(Isa::widest().supported());
        let e = KernelsError::Unsupported(Isa::Avx512).to_string();
        assert!(
            e.starts_with("SEBULBA_KERNELS=avx512: this CPU lacks it"),
            "{e}"
        );
    }

    /// The path the tests of this process run on is the one the variable
    /// names, so CI's runs under each path really take it.
    #[test]
    fn the_active_path_is_the_one_asked_for() {
        let asked = std::env::var(VARIABLE)
            .ok()
            .and_then(|v| Isa::parse(&v).ok().flatten());
        assert_eq!(active(), asked.unwrap_or_else(Isa::widest));
        eprintln!("kernels: {}", active().name());
    }
}
