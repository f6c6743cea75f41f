//! Composing an operator's stage into the `chain_socket` component, so a pipeline
//! whose built-in stages sit around that stage crosses from the engine into
//! WebAssembly once a round (docs/components.md, "One call for the built-in
//! stages"). The composition instantiates the stage inside the socket: it keeps
//! its own instance and linear memory, and the call between them goes through
//! the adapters wasmtime compiles, not through the engine.
//!
//! The composed component is written here with the parser and encoder wasmtime
//! already links (one version of each in the binary):
//!
//! - it opens with the stage's own imports and the type definitions they need,
//!   copied as they are, so it imports exactly what the stage imports, at the
//!   same indices (whatever that is, a call to it traps: COMP-1);
//! - it nests the stage and the socket whole, instantiates the stage with those
//!   imports, then the socket with the stage's exports in the imports of the same
//!   names and the stage's imports in its other ones (the WIT types);
//! - it exports what the socket exports.

use std::sync::Arc;

use wasm_encoder::{
    Alias, Component, ComponentAliasSection, ComponentExportKind, ComponentExportSection,
    ComponentInstanceSection, ComponentSectionId, RawSection,
};
use wasmparser::{
    BinaryReader, ComponentAlias, ComponentAliasSectionReader, ComponentExportSectionReader,
    ComponentExternalKind, ComponentImportSectionReader, ComponentOuterAliasKind, ComponentTypeRef,
    ComponentTypeSectionReader,
};

use super::builtin::CHAIN_SOCKET;
use super::{ComponentKind, LoadError, LoadedComponent, Runtime};

impl Runtime {
    /// The `chain_socket` component with `stage` plugged into its import, compiled
    /// and checked as a stage named after `stage` (its failures are the stage's).
    ///
    /// # Errors
    /// When `stage` is not a stage component loaded with its bytes, or its
    /// exports do not fit the socket's import.
    pub fn plug_into_chain(
        &self,
        stage: &LoadedComponent,
    ) -> Result<Arc<LoadedComponent>, LoadError> {
        let invalid = |detail: String| LoadError::Invalid {
            name: stage.name().to_owned(),
            detail: format!("cannot be composed with the built-in stages: {detail}"),
        };
        let bytes = stage
            .wasm
            .as_deref()
            .filter(|_| stage.kind() == ComponentKind::Stage)
            .ok_or_else(|| invalid("not a stage component".to_owned()))?;
        let socket = CHAIN_SOCKET.inflate("chain_socket")?;
        let composed = compose(&socket, bytes).map_err(invalid)?;
        self.load(ComponentKind::Stage, stage.name(), &composed)
    }
}

/// `socket` with `plug`'s exports in the imports of the same names.
fn compose(socket: &[u8], plug: &[u8]) -> Result<Vec<u8>, String> {
    let plug_sections = sections(plug).map_err(|e| format!("the stage: {e}"))?;
    let socket_sections = sections(socket).map_err(|e| format!("the socket: {e}"))?;
    let mut composed = Component::new();
    let mut spaces = Spaces::default();
    let mut plug_imports = Vec::new();
    let mut opening = true;
    for section in &plug_sections {
        match section.id {
            CUSTOM => {}
            TYPE | CORE_TYPE | IMPORT | ALIAS if opening => {
                spaces
                    .count(section, &mut plug_imports)
                    .map_err(|e| format!("the stage: {e}"))?;
                composed.section(&RawSection {
                    id: section.id,
                    data: section.data,
                });
            }
            IMPORT => {
                return Err("the stage imports something after its own definitions".to_owned());
            }
            _ => opening = false,
        }
    }
    let plug_exports = exports(&plug_sections).map_err(|e| format!("the stage: {e}"))?;
    let socket_imports = imports(&socket_sections).map_err(|e| format!("the socket: {e}"))?;
    let socket_exports = exports(&socket_sections).map_err(|e| format!("the socket: {e}"))?;

    for nested in [plug, socket] {
        composed.section(&RawSection {
            id: ComponentSectionId::Component as u8,
            data: nested,
        });
    }
    let plug_component = spaces.next(ComponentExportKind::Component);
    let socket_component = spaces.next(ComponentExportKind::Component);

    let mut instances = ComponentInstanceSection::new();
    instances.instantiate(
        plug_component,
        plug_imports
            .iter()
            .map(|import| (import.name, import.kind, import.index)),
    );
    composed.section(&instances);
    let plug_instance = spaces.next(ComponentExportKind::Instance);

    // The socket's imports: the stage's exports of the same names, else the
    // stage's imports of the same names.
    let mut aliases = ComponentAliasSection::new();
    let mut socket_args = Vec::new();
    for import in &socket_imports {
        let index = if plug_exports.contains(&(import.name, import.kind)) {
            aliases.alias(Alias::InstanceExport {
                instance: plug_instance,
                kind: import.kind,
                name: import.name,
            });
            spaces.next(import.kind)
        } else {
            plug_imports
                .iter()
                .find(|own| own.name == import.name && own.kind == import.kind)
                .map(|own| own.index)
                .ok_or_else(|| {
                    format!(
                        "the socket needs `{}`, which the stage neither exports nor imports",
                        import.name
                    )
                })?
        };
        socket_args.push((import.name, import.kind, index));
    }
    composed.section(&aliases);
    let mut instances = ComponentInstanceSection::new();
    instances.instantiate(socket_component, socket_args);
    composed.section(&instances);
    let socket_instance = spaces.next(ComponentExportKind::Instance);

    let mut aliases = ComponentAliasSection::new();
    let mut outer_exports = ComponentExportSection::new();
    for (name, kind) in socket_exports {
        aliases.alias(Alias::InstanceExport {
            instance: socket_instance,
            kind,
            name,
        });
        outer_exports.export(name, kind, spaces.next(kind), None);
    }
    composed.section(&aliases);
    composed.section(&outer_exports);
    Ok(composed.finish())
}

const CUSTOM: u8 = ComponentSectionId::CoreCustom as u8;
const CORE_TYPE: u8 = ComponentSectionId::CoreType as u8;
const ALIAS: u8 = ComponentSectionId::Alias as u8;
const TYPE: u8 = ComponentSectionId::Type as u8;
const IMPORT: u8 = ComponentSectionId::Import as u8;
const EXPORT: u8 = ComponentSectionId::Export as u8;

/// One top-level section of a component.
struct Section<'a> {
    id: u8,
    data: &'a [u8],
    /// Where `data` starts in the component, for the parser's errors.
    offset: usize,
}

impl<'a> Section<'a> {
    fn reader(&self) -> BinaryReader<'a> {
        BinaryReader::new(self.data, self.offset)
    }
}

/// A component's top-level sections; nested modules and components stay whole.
fn sections(bytes: &[u8]) -> Result<Vec<Section<'_>>, String> {
    let header = Component::HEADER.len();
    if bytes.get(..header) != Some(&Component::HEADER[..]) {
        return Err("not a WebAssembly component".to_owned());
    }
    let mut reader = BinaryReader::new(&bytes[header..], header);
    let mut found = Vec::new();
    while !reader.eof() {
        let id = reader.read_u8().map_err(|e| e.to_string())?;
        let size = reader.read_var_u32().map_err(|e| e.to_string())?;
        let offset = reader.original_position();
        let data = reader
            .read_bytes(size as usize)
            .map_err(|e| e.to_string())?;
        found.push(Section { id, data, offset });
    }
    Ok(found)
}

/// An item a component imports, and its index in the space of its kind.
struct Import<'a> {
    name: &'a str,
    kind: ComponentExportKind,
    index: u32,
}

/// The items a component's sections have defined so far, in the index spaces
/// an import can be in (the core modules' among them).
#[derive(Default)]
struct Spaces {
    modules: u32,
    funcs: u32,
    values: u32,
    types: u32,
    instances: u32,
    components: u32,
}

impl Spaces {
    /// The index of a new item of `kind`.
    fn next(&mut self, kind: ComponentExportKind) -> u32 {
        let space = match kind {
            ComponentExportKind::Module => &mut self.modules,
            ComponentExportKind::Func => &mut self.funcs,
            ComponentExportKind::Value => &mut self.values,
            ComponentExportKind::Type => &mut self.types,
            ComponentExportKind::Instance => &mut self.instances,
            ComponentExportKind::Component => &mut self.components,
        };
        *space += 1;
        *space - 1
    }

    /// Counts what a type, import or alias section defines, and lists its imports.
    fn count<'a>(
        &mut self,
        section: &Section<'a>,
        imports: &mut Vec<Import<'a>>,
    ) -> Result<(), String> {
        let error = |e: wasmparser::BinaryReaderError| e.to_string();
        match section.id {
            TYPE => {
                for _ in ComponentTypeSectionReader::new(section.reader()).map_err(error)? {
                    self.next(ComponentExportKind::Type);
                }
            }
            IMPORT => {
                for import in ComponentImportSectionReader::new(section.reader()).map_err(error)? {
                    let import = import.map_err(error)?;
                    let kind = import_kind(import.ty);
                    let index = self.next(kind);
                    imports.push(Import {
                        name: import.name.name,
                        kind,
                        index,
                    });
                }
            }
            ALIAS => {
                for alias in ComponentAliasSectionReader::new(section.reader()).map_err(error)? {
                    let kind = match alias.map_err(error)? {
                        ComponentAlias::InstanceExport { kind, .. } => Some(export_kind(kind)),
                        ComponentAlias::Outer { kind, .. } => match kind {
                            ComponentOuterAliasKind::CoreModule => {
                                Some(ComponentExportKind::Module)
                            }
                            ComponentOuterAliasKind::Type => Some(ComponentExportKind::Type),
                            ComponentOuterAliasKind::Component => {
                                Some(ComponentExportKind::Component)
                            }
                            // Core types: a space no import is in.
                            ComponentOuterAliasKind::CoreType => None,
                        },
                        // Core functions, memories, tables: likewise.
                        ComponentAlias::CoreInstanceExport { .. } => None,
                    };
                    if let Some(kind) = kind {
                        self.next(kind);
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// What a component imports, by name and kind.
fn imports<'a>(sections: &[Section<'a>]) -> Result<Vec<Import<'a>>, String> {
    let mut spaces = Spaces::default();
    let mut found = Vec::new();
    for section in sections.iter().filter(|s| s.id == IMPORT) {
        spaces.count(section, &mut found)?;
    }
    Ok(found)
}

/// What a component exports, by name and kind.
fn exports<'a>(sections: &[Section<'a>]) -> Result<Vec<(&'a str, ComponentExportKind)>, String> {
    let mut found = Vec::new();
    for section in sections.iter().filter(|s| s.id == EXPORT) {
        let reader =
            ComponentExportSectionReader::new(section.reader()).map_err(|e| e.to_string())?;
        for export in reader {
            let export = export.map_err(|e| e.to_string())?;
            found.push((export.name.name, export_kind(export.kind)));
        }
    }
    Ok(found)
}

fn import_kind(ty: ComponentTypeRef) -> ComponentExportKind {
    match ty {
        ComponentTypeRef::Module(_) => ComponentExportKind::Module,
        ComponentTypeRef::Func(_) => ComponentExportKind::Func,
        ComponentTypeRef::Value(_) => ComponentExportKind::Value,
        ComponentTypeRef::Type(_) => ComponentExportKind::Type,
        ComponentTypeRef::Instance(_) => ComponentExportKind::Instance,
        ComponentTypeRef::Component(_) => ComponentExportKind::Component,
    }
}

fn export_kind(kind: ComponentExternalKind) -> ComponentExportKind {
    match kind {
        ComponentExternalKind::Module => ComponentExportKind::Module,
        ComponentExternalKind::Func => ComponentExportKind::Func,
        ComponentExternalKind::Value => ComponentExportKind::Value,
        ComponentExternalKind::Type => ComponentExportKind::Type,
        ComponentExternalKind::Instance => ComponentExportKind::Instance,
        ComponentExternalKind::Component => ComponentExportKind::Component,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test_component(name: &str) -> Vec<u8> {
        std::fs::read(std::path::Path::new(env!("SLUICE_TEST_COMPONENTS")).join(name))
            .expect("test component")
    }

    fn socket() -> Vec<u8> {
        CHAIN_SOCKET.inflate("chain_socket").expect("inflates")
    }

    fn imported(component: &[u8]) -> Vec<(String, ComponentExportKind)> {
        let sections = sections(component).expect("sections");
        imports(&sections)
            .expect("imports")
            .into_iter()
            .map(|import| (import.name.to_owned(), import.kind))
            .collect()
    }

    fn exported(component: &[u8]) -> Vec<(String, ComponentExportKind)> {
        let sections = sections(component).expect("sections");
        exports(&sections)
            .expect("exports")
            .into_iter()
            .map(|(name, kind)| (name.to_owned(), kind))
            .collect()
    }

    #[test]
    fn the_composition_imports_what_the_stage_imports_and_exports_what_the_socket_exports() {
        let stage = test_component("std_echo.wasm");
        let socket = socket();
        let composed = compose(&socket, &stage).expect("composes");
        let stage_imports = imported(&stage);
        assert!(
            stage_imports
                .iter()
                .any(|(name, _)| name.starts_with("wasi:cli/stderr@")),
            "{stage_imports:?}"
        );
        assert_eq!(imported(&composed), stage_imports);
        assert_eq!(exported(&composed), exported(&socket));
        assert!(exported(&socket).iter().any(|(name, kind)| {
            name.starts_with("sluice:dataflow/transform@") && *kind == ComponentExportKind::Instance
        }));
    }

    #[test]
    fn a_component_without_the_sockets_import_is_refused_by_what_is_missing() {
        let codec = test_component("endless_codec.wasm");
        let error = compose(&socket(), &codec).expect_err("no transform");
        assert!(
            error.starts_with("the socket needs `sluice:dataflow/transform@")
                && error.ends_with("which the stage neither exports nor imports"),
            "{error}"
        );
    }

    #[test]
    fn bytes_that_are_not_a_whole_component_are_refused_without_a_panic() {
        let stage = test_component("scale.wasm");
        let core_module = b"\0asm\x01\0\0\0";
        for bad in [&b""[..], &core_module[..], &stage[..stage.len() - 1]] {
            let error = compose(&socket(), bad).expect_err("refused");
            assert!(error.starts_with("the stage: "), "{error}");
        }
    }
}
