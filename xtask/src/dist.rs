//! `cargo xtask dist [--check]`: the gateway builds. For x86_64 and aarch64: a
//! static, stripped musl binary with the default components embedded (and
//! without the demo: no default features), its
//! SHA-256, and a Debian package (`packaging/`: the binary in `/usr/bin`, the
//! example config in `/etc/sluice/`, the systemd unit), all in `target/packages/`.
//! `--check` then runs `engine/tests/it/dist.rs` on them: each binary against a
//! Modbus peer and Mosquitto (the aarch64 one under `qemu-aarch64-static`), each
//! package installed into an empty root, its unit verified; on the x86_64 binary,
//! what differs between C libraries (an uploaded stage's threads and their
//! scheduling policy under musl).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{integration_tests, run};

/// A gateway build: its Rust target, its Debian architecture, and the
/// environment its build needs: the linker, and the C compiler and archiver of
/// the few C helpers in dependencies (no musl toolchain is needed: they use no
/// libc headers beyond the freestanding ones).
struct Arch {
    triple: &'static str,
    debian: &'static str,
    env: &'static [(&'static str, &'static str)],
    /// Crates this target builds at `opt-level = "z"` instead of the `dist`
    /// profile's level for them.
    smallest: &'static [&'static str],
}

/// The component compiler (the `dist` profile builds it at `"s"`). At `"z"` the
/// x86_64 binary is 1.1 MB smaller (under 20 MB) and compiles a component about
/// 1.25x slower: the first start on a fresh data directory and each upload pay it
/// (docs/performance.md, "Gateway builds"). The aarch64 binary is under 20 MB
/// without it, and at `"z"` compiled three times slower under QEMU.
const COMPONENT_COMPILER: &[&str] = &[
    "cranelift-assembler-x64",
    "cranelift-bforest",
    "cranelift-bitset",
    "cranelift-codegen",
    "cranelift-control",
    "cranelift-entity",
    "cranelift-frontend",
    "cranelift-native",
    "regalloc2",
    "wasmtime-internal-cranelift",
    "wasmtime-environ",
    "wasmparser",
];

const ARCHES: [Arch; 2] = [
    Arch {
        triple: "x86_64-unknown-linux-musl",
        debian: "amd64",
        env: &[
            ("CC_x86_64_unknown_linux_musl", "gcc"),
            ("AR_x86_64_unknown_linux_musl", "ar"),
        ],
        smallest: COMPONENT_COMPILER,
    },
    Arch {
        triple: "aarch64-unknown-linux-musl",
        debian: "arm64",
        env: &[
            (
                "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER",
                "aarch64-linux-gnu-gcc",
            ),
            ("CC_aarch64_unknown_linux_musl", "aarch64-linux-gnu-gcc"),
            ("AR_aarch64_unknown_linux_musl", "aarch64-linux-gnu-ar"),
        ],
        smallest: &[],
    },
];

impl Arch {
    /// Where this target's build keeps its files.
    fn target_dir(&self, root: &Path) -> PathBuf {
        root.join("target").join(format!("gateway-{}", self.triple))
    }
}

pub fn dist(root: &Path, check: bool) -> Result<(), String> {
    run(root, "bash", &["scripts/setup-dist.sh"])?;
    // Not `target/dist`: cargo keeps the `dist` profile's own files there.
    let out = root.join("target").join("packages");
    fs::create_dir_all(&out).map_err(|e| format!("cannot make {}: {e}", out.display()))?;
    let version = version(root)?;
    // One build a target, the two at once: their settings differ (`smallest`),
    // and their fat-LTO links (one thread each) run side by side. Each has its
    // own target directory, as cargo builds one at a time in a directory.
    let mut builds = Vec::new();
    for arch in &ARCHES {
        let mut args: Vec<String> = [
            "build",
            "--locked",
            "--profile",
            "dist",
            "-p",
            "sluice",
            "--no-default-features",
            "--target",
            arch.triple,
        ]
        .map(String::from)
        .into();
        args.push("--target-dir".to_owned());
        args.push(arch.target_dir(root).display().to_string());
        for krate in arch.smallest {
            args.push("--config".to_owned());
            args.push(format!("profile.dist.package.{krate}.opt-level=\"z\""));
        }
        println!("==> cargo {}", args.join(" "));
        let build = Command::new("cargo")
            .args(&args)
            .envs(arch.env.iter().copied())
            .current_dir(root)
            .spawn();
        builds.push((args, build));
    }
    let mut failed = Vec::new();
    // Every build started is waited for, whatever the other one did.
    for (args, build) in builds {
        match build.and_then(|mut build| build.wait()) {
            Ok(status) if status.success() => {}
            Ok(status) => failed.push(format!("`cargo {}` failed ({status})", args.join(" "))),
            Err(e) => failed.push(format!("`cargo {}`: {e}", args.join(" "))),
        }
    }
    if !failed.is_empty() {
        return Err(failed.join("\n"));
    }
    let mut sizes = Vec::new();
    for arch in &ARCHES {
        let built = arch
            .target_dir(root)
            .join(arch.triple)
            .join("dist")
            .join("sluice");
        let binary = out.join(format!("sluice-{version}-{}", arch.triple));
        copy(&built, &binary)?;
        if has_symbol_table(&binary)? {
            return Err(format!(
                "{} is not stripped: the profile's `strip` must be said again in a \
                 `[profile.dist.package]` entry of the engine's own crate",
                binary.display()
            ));
        }
        checksum(&binary)?;
        let package = package(root, &out, arch, &version, &binary)?;
        checksum(&package)?;
        let size = fs::metadata(&binary).map_err(|e| e.to_string())?.len();
        sizes.push(format!(
            "{}: {:.1} MB ({} bytes), {}",
            binary.display(),
            size as f64 / 1e6,
            size,
            package.display()
        ));
    }
    for line in &sizes {
        println!("dist: {line}");
    }
    if !check {
        return Ok(());
    }
    let dir = out.display().to_string();
    // The static binaries themselves: what musl's wrappers decide (they differ
    // from glibc's: the sandbox threads' scheduling policy, `runtime/threads.rs`)
    // is checked there, on a running gateway.
    integration_tests(
        root,
        &["dist::", "--ignored", "--nocapture"],
        &[("SLUICE_DIST", &dir)],
    )
}

/// Whether the ELF file at `path` (64-bit, little-endian: both targets) has
/// a symbol table section (`SHT_SYMTAB`), which a stripped binary has not.
fn has_symbol_table(path: &Path) -> Result<bool, String> {
    const SHT_SYMTAB: u64 = 2;
    let bytes = fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let field = |at: usize, len: usize| -> Result<u64, String> {
        let slice = bytes
            .get(at..at + len)
            .ok_or_else(|| format!("{}: ELF header cut short at {at}", path.display()))?;
        Ok(slice
            .iter()
            .rev()
            .fold(0, |value, byte| value << 8 | u64::from(*byte)))
    };
    if bytes.get(..6) != Some(&[0x7f, b'E', b'L', b'F', 2, 1][..]) {
        return Err(format!(
            "{} is not a 64-bit little-endian ELF file",
            path.display()
        ));
    }
    let table = usize::try_from(field(0x28, 8)?).map_err(|e| e.to_string())?;
    let entry = usize::try_from(field(0x3a, 2)?).map_err(|e| e.to_string())?;
    let count = usize::try_from(field(0x3c, 2)?).map_err(|e| e.to_string())?;
    for index in 0..count {
        if field(table + index * entry + 4, 4)? == SHT_SYMTAB {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The workspace's version (`[workspace.package] version`).
fn version(root: &Path) -> Result<String, String> {
    let manifest = fs::read_to_string(root.join("Cargo.toml")).map_err(|e| e.to_string())?;
    manifest
        .split("[workspace.package]")
        .nth(1)
        .and_then(|section| {
            section
                .lines()
                .find_map(|line| line.trim().strip_prefix("version = "))
        })
        .map(|quoted| quoted.trim_matches('"').to_owned())
        .ok_or_else(|| "no version under [workspace.package] in Cargo.toml".to_owned())
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))
}

/// Writes `FILE.sha256` beside `file`, in `sha256sum`'s format.
fn checksum(file: &Path) -> Result<(), String> {
    let dir = file.parent().unwrap_or(Path::new("."));
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("{} has no file name", file.display()))?;
    let output = Command::new("sha256sum")
        .arg(name)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("cannot run sha256sum: {e}"))?;
    if !output.status.success() {
        return Err(format!("sha256sum {name} failed"));
    }
    let sums = PathBuf::from(format!("{}.sha256", file.display()));
    fs::write(&sums, output.stdout).map_err(|e| format!("cannot write {}: {e}", sums.display()))
}

/// Builds `sluice_{version}_{arch}.deb` around `binary`.
fn package(
    root: &Path,
    out: &Path,
    arch: &Arch,
    version: &str,
    binary: &Path,
) -> Result<PathBuf, String> {
    let staging = out.join(format!("deb-{}", arch.debian));
    let _ = fs::remove_dir_all(&staging);
    let packaging = root.join("packaging");
    let files: [(&Path, &str, u32); 8] = [
        (binary, "usr/bin/sluice", 0o755),
        (
            &packaging.join("sluice.yaml"),
            "etc/sluice/sluice.yaml",
            0o644,
        ),
        (
            &packaging.join("sluice.service"),
            "usr/lib/systemd/system/sluice.service",
            0o644,
        ),
        (
            &root.join("README.md"),
            "usr/share/doc/sluice/README.md",
            0o644,
        ),
        (
            &packaging.join("copyright"),
            "usr/share/doc/sluice/copyright",
            0o644,
        ),
        (&packaging.join("conffiles"), "DEBIAN/conffiles", 0o644),
        (&packaging.join("postinst"), "DEBIAN/postinst", 0o755),
        (&packaging.join("prerm"), "DEBIAN/prerm", 0o755),
    ];
    let mut installed_bytes = 0;
    for (from, to, mode) in files {
        let target = staging.join(to);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        copy(from, &target)?;
        set_mode(&target, mode)?;
        if !to.starts_with("DEBIAN") {
            installed_bytes += fs::metadata(&target).map_err(|e| e.to_string())?.len();
        }
    }
    let template = fs::read_to_string(packaging.join("control")).map_err(|e| e.to_string())?;
    let control = template
        .replace("{version}", version)
        .replace("{arch}", arch.debian)
        .replace(
            "{installed_kib}",
            &installed_bytes.div_ceil(1024).to_string(),
        );
    fs::write(staging.join("DEBIAN/control"), control).map_err(|e| e.to_string())?;
    let deb = out.join(format!("sluice_{version}_{}.deb", arch.debian));
    let (staging_arg, deb_arg) = (staging.display().to_string(), deb.display().to_string());
    run(
        root,
        "dpkg-deb",
        &["--build", "--root-owner-group", &staging_arg, &deb_arg],
    )?;
    Ok(deb)
}

fn set_mode(file: &Path, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(file, fs::Permissions::from_mode(mode))
        .map_err(|e| format!("cannot set the mode of {}: {e}", file.display()))
}

#[cfg(test)]
mod tests {
    use super::has_symbol_table;
    use std::process::Command;

    #[test]
    fn a_binary_with_its_symbols_is_told_from_a_stripped_one() {
        let this = std::env::current_exe().expect("the test binary's path");
        assert_eq!(has_symbol_table(&this), Ok(true));
        let stripped = std::env::temp_dir().join(format!("xtask-stripped-{}", std::process::id()));
        let status = Command::new("strip")
            .arg("-o")
            .arg(&stripped)
            .arg(&this)
            .status()
            .expect("binutils' strip runs");
        assert!(status.success());
        let answer = has_symbol_table(&stripped);
        std::fs::remove_file(&stripped).expect("the copy is removed");
        assert_eq!(answer, Ok(false));
        let not_elf = has_symbol_table(std::path::Path::new("Cargo.toml"));
        assert!(not_elf.is_err_and(|e| e.contains("not a 64-bit little-endian ELF")));
    }
}
