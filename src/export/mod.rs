//! `sebulba export`: a run's weights for tools that know nothing of
//! sebulba. The published file names its network (`sebulba.model_spec` in
//! its metadata), so a weights file alone is enough; each format writes a
//! directory with a check of its outputs against the fused forward pass.

mod check;
mod onnx;
mod tensors;
mod torch;

use crate::cli::{ExportArgs, ExportFormat};
use anyhow::{Context, bail};
use sebulba_core::model::ModelSpec;
use sebulba_fused::FusedPolicy;
use std::path::{Path, PathBuf};

/// One file of an export.
pub struct Written {
    pub name: &'static str,
    pub bytes: Vec<u8>,
    /// What it holds, for the summary.
    pub what: String,
}

pub fn run(args: &ExportArgs) -> anyhow::Result<()> {
    let (weights, default_out) = weights_file(args)?;
    let bytes =
        std::fs::read(&weights).with_context(|| format!("reading {}", weights.display()))?;
    let spec = model_spec(&bytes).with_context(|| format!("{}", weights.display()))?;
    if !spec.network.fused_covers() {
        bail!(
            "{}: network.layer_norm = \"{}\" is not exported yet (only networks without LayerNorm)",
            weights.display(),
            spec.network.layer_norm.as_str()
        );
    }
    let out = args.out.clone().unwrap_or(default_out);
    let arch = spec.arch();
    let policy = FusedPolicy::from_safetensors(&arch, &bytes)
        .map_err(|e| anyhow::anyhow!("the weights do not fit their network: {e}"))?;
    let tensors = tensors::torch_layout(&bytes)?;
    let files = match args.format {
        ExportFormat::Torch => torch::files(&spec, &arch, &policy, &tensors)?,
        ExportFormat::Onnx => onnx::files(&arch, &policy, &tensors)?,
    };
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    println!("exported {} to {}:", weights.display(), out.display());
    for f in &files {
        let path = out.join(f.name);
        std::fs::write(&path, &f.bytes).with_context(|| format!("writing {}", path.display()))?;
        println!("  {:<20} {}", f.name, f.what);
    }
    let dir = out.display().to_string();
    match args.format {
        ExportFormat::Torch => println!(
            "load it with `import sebulba_policy; policy = sebulba_policy.load({dir:?})`; \
             check it with `python {} {dir}`",
            out.join("sebulba_policy.py").display()
        ),
        ExportFormat::Onnx => println!(
            "run it with onnxruntime (`policy.onnx`); check it with `python {} {dir}`",
            out.join("check_onnx.py").display()
        ),
    }
    Ok(())
}

/// The weights file `args` names, and where its export goes by default.
fn weights_file(args: &ExportArgs) -> anyhow::Result<(PathBuf, PathBuf)> {
    let suffix = match args.format {
        ExportFormat::Torch => "torch",
        ExportFormat::Onnx => "onnx",
    };
    let path = &args.path;
    if path.is_dir() {
        let name = args.weights.file_name();
        let file = path.join(name);
        if !file.is_file() {
            bail!(
                "{}: no {name} (a run writes final.safetensors when it ends, best.safetensors at its best evaluation)",
                path.display()
            );
        }
        return Ok((file, path.join(format!("export-{suffix}"))));
    }
    if !path.is_file() {
        bail!(
            "{}: neither a run directory nor a weights file",
            path.display()
        );
    }
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let dir = path.parent().unwrap_or(Path::new("."));
    Ok((path.clone(), dir.join(format!("{stem}-{suffix}"))))
}

/// The network a published file names in its metadata.
fn model_spec(bytes: &[u8]) -> anyhow::Result<ModelSpec> {
    let (_, header) = safetensors::SafeTensors::read_metadata(bytes)
        .map_err(|e| anyhow::anyhow!("not a safetensors file: {e}"))?;
    let json = header
        .metadata()
        .as_ref()
        .and_then(|m| m.get("sebulba.model_spec"))
        .context("no `sebulba.model_spec` in its metadata: not a file sebulba published")?;
    let spec: ModelSpec =
        serde_json::from_str(json).context("its `sebulba.model_spec` does not parse")?;
    spec.check()
        .context("its `sebulba.model_spec` is not a network sebulba builds")?;
    Ok(spec)
}
