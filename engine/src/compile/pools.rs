//! The component pools (sandboxes) a compile opens sessions and evaluators in:
//! new ones from the registry's active versions, or, for a device reload, those
//! of the running gateway, so rebuilt devices share their tenant's sandboxes.

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::Whitelist;
use crate::runtime::{
    CodecPool, ComponentKind, DecoderPool, IngestPool, LoadedComponent, Registry, RulesPool,
};

use super::limits::SandboxLimits;

/// Pools by tenant and component, and the whitelists read at the start.
#[derive(Debug, Default)]
pub struct Pools {
    codecs: HashMap<(u32, String), Arc<CodecPool>>,
    decoders: HashMap<(u32, String), Arc<DecoderPool>>,
    /// Of the engine's own decoders, for the devices whose stages they run.
    ingests: HashMap<(u32, String), Arc<IngestPool>>,
    rules: HashMap<u32, Arc<RulesPool>>,
    whitelist: Option<Whitelist>,
}

impl Pools {
    /// No pool to reuse: every one is made afresh.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reuses `pool` for `tenant`'s channels speaking its codec.
    pub fn reuse_codec(&mut self, tenant: u32, pool: Arc<CodecPool>) {
        self.codecs.insert((tenant, pool.name().to_owned()), pool);
    }

    /// Reuses `pool` for `tenant`'s MQTT channels reading with its decoder.
    pub fn reuse_decoder(&mut self, tenant: u32, pool: Arc<DecoderPool>) {
        self.decoders.insert((tenant, pool.name().to_owned()), pool);
    }

    /// Reuses `pool` as `tenant`'s rules sandbox (when it runs the tenant's rules).
    pub fn reuse_rules(&mut self, tenant: u32, pool: Arc<RulesPool>) {
        self.rules.insert(tenant, pool);
    }

    /// Keeps the whitelists the running stores follow: they stay those of the start
    /// (stored alarms and commands keep one state machine), so a reload need not
    /// read them again.
    pub fn reuse_whitelist(&mut self, whitelist: Whitelist) {
        self.whitelist = Some(whitelist);
    }

    /// The whitelists to reuse, if any.
    pub(super) fn whitelist(&self) -> Option<&Whitelist> {
        self.whitelist.as_ref()
    }

    /// `tenant`'s pool of codec `name`.
    pub(super) fn codec(
        &mut self,
        registry: &Registry,
        limits: &SandboxLimits,
        tenant: u32,
        name: &str,
    ) -> Result<Arc<CodecPool>, String> {
        let key = (tenant, name.to_owned());
        if let Some(pool) = self.codecs.get(&key) {
            return Ok(Arc::clone(pool));
        }
        let component = active(registry, name, ComponentKind::Codec)?;
        let pool = registry
            .runtime()
            .codec_pool(&component, limits.get(tenant))
            .map_err(|e| e.to_string())?;
        self.codecs.insert(key, Arc::clone(&pool));
        Ok(pool)
    }

    /// `tenant`'s pool of decoder `name`.
    pub(super) fn decoder(
        &mut self,
        registry: &Registry,
        limits: &SandboxLimits,
        tenant: u32,
        name: &str,
    ) -> Result<Arc<DecoderPool>, String> {
        let key = (tenant, name.to_owned());
        if let Some(pool) = self.decoders.get(&key) {
            return Ok(Arc::clone(pool));
        }
        let component = active(registry, name, ComponentKind::Decoder)?;
        let pool = registry
            .runtime()
            .decoder_pool(&component, limits.get(tenant))
            .map_err(|e| e.to_string())?;
        self.decoders.insert(key, Arc::clone(&pool));
        Ok(pool)
    }

    /// `tenant`'s pool of decoder `component` (one of the engine's own) for
    /// the devices whose pipeline it runs in the same call.
    pub(super) fn ingest(
        &mut self,
        registry: &Registry,
        limits: &SandboxLimits,
        tenant: u32,
        component: &LoadedComponent,
    ) -> Result<Arc<IngestPool>, String> {
        let key = (tenant, component.name().to_owned());
        if let Some(pool) = self.ingests.get(&key) {
            return Ok(Arc::clone(pool));
        }
        let pool = registry
            .runtime()
            .ingest_pool(component, limits.get(tenant))
            .map_err(|e| e.to_string())?;
        self.ingests.insert(key, Arc::clone(&pool));
        Ok(pool)
    }

    /// `tenant`'s sandbox of rules component `name`, and whether it is a new one
    /// (a running sandbox was checked when it was made).
    pub(super) fn rules(
        &mut self,
        registry: &Registry,
        limits: &SandboxLimits,
        tenant: u32,
        name: &str,
    ) -> Result<(Arc<RulesPool>, bool), String> {
        if let Some(pool) = self.rules.get(&tenant).filter(|p| p.name() == name) {
            return Ok((Arc::clone(pool), false));
        }
        let pool = fresh_rules(registry, name, limits.get(tenant))?;
        self.rules.insert(tenant, Arc::clone(&pool));
        Ok((pool, true))
    }
}

/// A new pool of the rules component `name`.
pub(super) fn fresh_rules(
    registry: &Registry,
    name: &str,
    limits: crate::runtime::Limits,
) -> Result<Arc<RulesPool>, String> {
    let component = active(registry, name, ComponentKind::Rules)?;
    registry
        .runtime()
        .rules_pool(&component, limits)
        .map_err(|e| e.to_string())
}

/// The active version of component `name`, which must be of `kind`.
fn active(
    registry: &Registry,
    name: &str,
    kind: ComponentKind,
) -> Result<Arc<LoadedComponent>, String> {
    let Some(component) = registry.active(name) else {
        return Err(format!("no {kind} component `{name}` is registered"));
    };
    if component.kind() != kind {
        return Err(format!(
            "component `{name}` is a {} component, not a {kind} component",
            component.kind()
        ));
    }
    Ok(component)
}
