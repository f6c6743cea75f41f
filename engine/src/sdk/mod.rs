//! The component SDK: `sluice component new stage|codec|decoder NAME DIR` writes a crate that
//! builds a component on its own (`cargo build --release --target wasm32-wasip2`)
//! anywhere: the WIT package and the guest kit go into the crate, from copies
//! built into this binary, since an author's machine may have no Sluice source.
//! The crate's `Cargo.lock` pins the versions the built-in components use.
//! Codec test cases (`sluice test` on a file with a top-level `codec`) check a
//! codec's frames without a gateway, decoder test cases (a top-level `decoder`)
//! a decoder's messages and writes.

mod codec_cases;
mod decoder_cases;

use std::path::{Path, PathBuf};

use compact_str::CompactString;

pub use codec_cases::run as run_codec_cases;
pub use decoder_cases::run as run_decoder_cases;

use crate::model::{Access, ByteOrder, DataType, TagSpec};
use std::sync::Arc;

use crate::runtime::{ComponentKind, Embedded, LoadedComponent, Registry};
use crate::yaml::{Diagnostics, Fields, Node, enum_value};

include!(concat!(env!("OUT_DIR"), "/sdk_sources.rs"));

/// Why a crate was not written.
#[derive(Debug, thiserror::Error)]
pub enum SdkError {
    #[error("there is no `{0}` template: `stage`, `codec` or `decoder`")]
    Kind(String),
    #[error(
        "`{0}` cannot name a component crate: use 1 to 64 letters, digits, `_` or `-`, \
         starting with a letter"
    )]
    Name(String),
    #[error("{} is not empty: a new crate goes into a new or empty directory", .0.display())]
    NotEmpty(PathBuf),
    #[error("`{0}`: the copy built into this binary is damaged")]
    Damaged(String),
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What differs between the crates of two kinds.
struct Template {
    kind: &'static str,
    source: Embedded,
    /// The line that glues the template to the WIT, and what it becomes in a
    /// crate of its own, whose WIT is in `wit/`.
    glue: (&'static str, &'static str),
    /// The crate's `[features]`, if any.
    features: &'static str,
    /// How a gateway uses the component once uploaded.
    usage: &'static str,
    /// Its test cases for `sluice test` (`NAME` the crate's name), if any.
    cases: Option<Embedded>,
}

const TEMPLATES: [Template; 3] = [
    Template {
        kind: "stage",
        source: STAGE_TEMPLATE,
        glue: (
            "sluice_guest::stage_component!(AddConstant);",
            "sluice_guest::stage_component!(AddConstant, \"wit\");",
        ),
        features: "",
        usage: "A pipeline then names it (`- use: NAME` with its settings, e.g. `add: 1.5`).",
        cases: None,
    },
    Template {
        kind: "codec",
        source: CODEC_TEMPLATE,
        glue: (
            "sluice_guest::codec_component!(Registers);",
            "sluice_guest::codec_component!(Registers, \"wit\");",
        ),
        // The kit's native test helpers, for `cargo test --features native`.
        features: "[features]\nnative = [\"sluice-guest/fuzz\"]\n\n",
        usage: "It speaks the protocol `PROTOCOL` (`fn protocols` in `src/lib.rs` declares its \
                name, transports and settings): once uploaded, a channel names it with \
                `protocol: PROTOCOL`. `sluice test tests/cases.yaml` checks its frames without a \
                gateway.",
        cases: Some(CODEC_CASES),
    },
    Template {
        kind: "decoder",
        source: DECODER_TEMPLATE,
        glue: (
            "sluice_guest::decoder_component!(KeyValues);",
            "sluice_guest::decoder_component!(KeyValues, \"wit\");",
        ),
        features: "",
        usage: "A device that publishes by itself then names it: a channel with `protocol: mqtt` \
                and `decoder: NAME`, each tag's `address` the key of its value in a message. \
                `sluice test tests/cases.yaml` checks its messages and writes without a gateway.",
        cases: Some(DECODER_CASES),
    },
];

/// Writes a `kind` component crate named `name` into `dir` (created if missing,
/// refused if not empty); returns the files written, relative to `dir`.
///
/// # Errors
/// An unknown kind, a name that is not a crate's, a directory in use, a write
/// that failed.
pub fn new_crate(kind: &str, name: &str, dir: &Path) -> Result<Vec<PathBuf>, SdkError> {
    let template = TEMPLATES
        .iter()
        .find(|t| t.kind == kind)
        .ok_or_else(|| SdkError::Kind(kind.to_owned()))?;
    let fine = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
    if !fine {
        return Err(SdkError::Name(name.to_owned()));
    }
    let in_use = std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some());
    if in_use {
        return Err(SdkError::NotEmpty(dir.to_owned()));
    }
    let mut files: Vec<(String, String)> = vec![
        ("Cargo.toml".into(), manifest(name, template)),
        // The built-in components' versions: the same build, offline if need be.
        ("Cargo.lock".into(), unpack("Cargo.lock", LOCK)?),
        (
            "src/lib.rs".into(),
            unpack("src/lib.rs", template.source)?
                .replace(template.glue.0, template.glue.1)
                .replace(TEMPLATE_PROTOCOL, &format!("\"{}\"", protocol_name(name))),
        ),
        ("README.md".into(), readme(name, template)),
        (".gitignore".into(), "/target\n".into()),
        ("sluice-guest/Cargo.toml".into(), KIT_MANIFEST.to_owned()),
    ];
    if let Some(cases) = template.cases {
        let wasm = name.replace('-', "_");
        let cases = unpack("tests/cases.yaml", cases)?;
        files.push(("tests/cases.yaml".into(), cases.replace("NAME", &wasm)));
    }
    for (folder, packed) in [("wit", WIT), ("sluice-guest", KIT)] {
        for (file, text) in packed {
            let file = format!("{folder}/{file}");
            let text = unpack(&file, *text)?;
            files.push((file, text));
        }
    }
    let mut written = Vec::new();
    for (file, text) in files {
        let path = dir.join(&file);
        let write = |path: &Path| {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(path, text)
        };
        write(&path).map_err(|source| SdkError::Write { path, source })?;
        written.push(PathBuf::from(file));
    }
    Ok(written)
}

/// The `kind` component `name` of a test file: a `.wasm` file (relative to
/// the file) or a built-in.
fn load(
    file: &Path,
    name: &str,
    kind: ComponentKind,
    registry: &Registry,
) -> Result<Arc<LoadedComponent>, String> {
    if !name.ends_with(".wasm") {
        return registry
            .active(name)
            .filter(|c| c.kind() == kind)
            .ok_or_else(|| format!("no built-in {kind} `{name}`, and not a `.wasm` file"));
    }
    let path = file.parent().unwrap_or(Path::new(".")).join(name);
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let stem = path
        .file_stem()
        .map_or_else(|| kind.to_string(), |s| s.to_string_lossy().into_owned());
    registry
        .runtime()
        .load(kind, &stem, &bytes)
        .map_err(|e| e.to_string())
}

/// A tag of a test file: `key`, `address`, `dataType`, and `byteOrder`,
/// `length`, `access` (`R` by default) when given.
fn read_tag(node: &Node, errors: &mut Diagnostics) -> Option<TagSpec> {
    let mut f = Fields::of(node, "tag", errors)?;
    let key = f.required::<String>("key", errors);
    let address = f.required::<String>("address", errors);
    let data_type = f
        .required_with("dataType", errors, |n| enum_value(n, DataType::NAMES))
        .map(|(data_type, _)| data_type);
    let byte_order = f
        .optional_with("byteOrder", errors, |n| enum_value(n, ByteOrder::NAMES))
        .unwrap_or_default();
    let length = f.optional::<u32>("length", errors).unwrap_or(0);
    let access = f
        .optional_with("access", errors, |n| enum_value(n, Access::NAMES))
        .unwrap_or(Access::Read);
    f.finish(errors);
    Some(TagSpec {
        key: key?.into(),
        address: CompactString::from(address?),
        data_type: data_type?,
        length,
        byte_order,
        factor: 1.0,
        offset: 0.0,
        deadband: 0.0,
        access,
        settings: Vec::new(),
    })
}

/// The protocol name the codec template declares, which a new crate's name replaces.
const TEMPLATE_PROTOCOL: &str = "\"registers\"";

/// The protocol a codec crate named `name` declares: the name in lower case,
/// `_` as `-` (a protocol name's alphabet).
fn protocol_name(name: &str) -> String {
    name.to_ascii_lowercase().replace('_', "-")
}

/// The text of an embedded file.
fn unpack(file: &str, packed: Embedded) -> Result<String, SdkError> {
    let damaged = || SdkError::Damaged(file.to_owned());
    let bytes = packed.inflate(file).map_err(|_| damaged())?;
    String::from_utf8(bytes).map_err(|_| damaged())
}

fn manifest(name: &str, template: &Template) -> String {
    format!(
        "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n\
         [lib]\ncrate-type = [\"cdylib\"]\n\n\
         [dependencies]\nsluice-guest = {{ path = \"sluice-guest\" }}\n{WIT_BINDGEN}\n\n{}\
         # A crate of its own, not a member of a workspace around it.\n[workspace]\n\n\
         {RELEASE_PROFILE}",
        template.features
    )
}

fn readme(name: &str, template: &Template) -> String {
    let file = name.replace('-', "_");
    let kind = template.kind;
    format!(
        "# {name}\n\n\
         A Sluice {kind} component. `src/lib.rs` is the {kind}; `wit/` is the contract it\n\
         implements (`sluice:dataflow` version {version} of the WIT) and `sluice-guest/` the\n\
         guest kit, both written by `sluice component new`; change them only with a new\n\
         Sluice release.\n\n\
         ```sh\n\
         rustup target add wasm32-wasip2\n\
         cargo build --release --target wasm32-wasip2\n\
         sluice component check target/wasm32-wasip2/release/{file}.wasm\n\
         curl -X PUT -H \"Authorization: Bearer $ADMIN\" --data-binary @target/wasm32-wasip2/release/{file}.wasm \\\n\
         \x20 \"http://GATEWAY:8080/components/{name}/1.0.0?kind={kind}\"\n\
         ```\n\n{}\n",
        template
            .usage
            .replace("NAME", name)
            .replace("PROTOCOL", &protocol_name(name)),
        version = crate::runtime::WIT_VERSION,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_is_glued_to_its_own_wit() {
        for template in &TEMPLATES {
            let source = unpack("src/lib.rs", template.source).expect("inflates");
            assert!(source.contains(template.glue.0), "{}", template.kind);
        }
        let codec = unpack("src/lib.rs", CODEC_TEMPLATE).expect("inflates");
        assert_eq!(codec.matches(TEMPLATE_PROTOCOL).count(), 1);
        assert_eq!(protocol_name("Fins_Omron"), "fins-omron");
    }

    #[test]
    fn a_crate_is_written_only_with_a_good_name_into_an_empty_directory() {
        let dir = std::env::temp_dir().join(format!("sluice-sdk-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for name in ["", "1st", "a b", "a/b", &"x".repeat(65)] {
            assert!(
                matches!(new_crate("stage", name, &dir), Err(SdkError::Name(_))),
                "{name}"
            );
        }
        assert!(matches!(
            new_crate("rules", "x", &dir),
            Err(SdkError::Kind(_))
        ));
        let written = new_crate("stage", "my-stage", &dir).expect("written");
        for file in [
            "Cargo.toml",
            "src/lib.rs",
            "wit/stage.wit",
            "sluice-guest/src/lib.rs",
        ] {
            assert!(written.contains(&PathBuf::from(file)), "{file}");
        }
        let kit = std::fs::read_to_string(dir.join("sluice-guest/Cargo.toml")).expect("kit");
        assert!(!kit.contains("workspace"), "{kit}");
        assert!(matches!(
            new_crate("stage", "again", &dir),
            Err(SdkError::NotEmpty(_))
        ));
        std::fs::remove_dir_all(&dir).expect("cleaned up");
    }
}
