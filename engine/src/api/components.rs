//! Components on a running engine (admin token):
//! - `GET /components`: every registered version, its kind, content hash, and
//!   whether it is active;
//! - `PUT /components/{name}/{version}?kind=stage|codec|rules|decoder` with the component's
//!   bytes: compile, check against its world, rebuild every pipeline with it and
//!   swap at each device's next round; a version that breaks a pipeline is
//!   refused (422) and the previous one stays;
//! - `POST /components/{name}/{version}/activate`: make a registered version
//!   active again (rollback);
//! - `DELETE /components/{name}/{version}`: remove an inactive version, or the
//!   only version of a component nothing uses;
//! - `POST /reload`: read the pipeline files and the device configuration again now.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::Admin;
use super::reply::{ApiReply, ErrorBody, error, json, ok};
use super::state::ApiState;
use crate::compile::Conflict;
use crate::deploy::{DeployError, Deployer};
use crate::runtime::{ComponentInfo, ComponentKind, LoadError};

/// A registered version of a component.
#[derive(Debug, Serialize, ToSchema)]
pub struct ComponentView {
    name: String,
    version: String,
    /// `codec`, `stage` or `rules`.
    kind: &'static str,
    /// SHA-256 of its bytes.
    hash: String,
    /// Whether pipelines and devices use this version.
    active: bool,
}

fn view(info: &ComponentInfo) -> ComponentView {
    ComponentView {
        name: info.name.clone(),
        version: info.version.clone(),
        kind: info.kind.as_str(),
        hash: info.hash.clone(),
        active: info.active,
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ComponentList {
    components: Vec<ComponentView>,
}

/// What `POST /reload` did with the pipeline files and the device configuration;
/// a part without a source to read is absent.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReloadReply {
    pipelines: Option<PipelinesReloaded>,
    devices: Option<DevicesReloaded>,
}

/// The pipelines reloaded (how many devices swapped theirs), or why not.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
enum PipelinesReloaded {
    Done { swapped: usize },
    Refused(ErrorBody),
}

/// The devices reloaded, or why not.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
enum DevicesReloaded {
    Done(DevicesChanged),
    Refused(ErrorBody),
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct DevicesChanged {
    added: Vec<String>,
    changed: Vec<String>,
    removed: Vec<String>,
    unchanged: usize,
    /// Sections that changed but apply only at the next start.
    restart_needed: Vec<&'static str>,
    /// Pushed devices whose file entry was edited since the push.
    conflicts: Vec<Conflict>,
}

fn deploy_status(e: &DeployError) -> StatusCode {
    match e {
        DeployError::Load(LoadError::ProtocolTaken { .. }) | DeployError::Taken { .. } => {
            StatusCode::CONFLICT
        }
        DeployError::Invalid(_) | DeployError::Load(_) => StatusCode::BAD_REQUEST,
        DeployError::Breaks(_)
        | DeployError::InUse(_)
        | DeployError::Pipelines(_)
        | DeployError::Devices(_) => StatusCode::UNPROCESSABLE_ENTITY,
        DeployError::Storage(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn deploy_error(e: &DeployError) -> ApiReply {
    error(deploy_status(e), e.to_string())
}

async fn blocking(
    deployer: &Arc<Deployer>,
    call: impl FnOnce(&Deployer) -> Result<ComponentInfo, DeployError> + Send + 'static,
) -> ApiReply {
    let deployer = Arc::clone(deployer);
    match tokio::task::spawn_blocking(move || call(&deployer)).await {
        Ok(Ok(info)) => ok(view(&info)),
        Ok(Err(e)) => deploy_error(&e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

#[utoipa::path(get, path = "/components", tag = "components", security(("bearer" = [])),
    responses(
        (status = 200, body = ComponentList),
        (status = 403, description = "Not the admin token", body = ErrorBody)))]
pub async fn list(State(state): State<ApiState>, _admin: Admin) -> ApiReply {
    let components = state.deployer.list().iter().map(view).collect();
    ok(ComponentList { components })
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct KindQuery {
    /// `codec`, `stage` or `rules`; needed for a new name.
    kind: Option<String>,
}

#[utoipa::path(put, path = "/components/{name}/{version}", tag = "components",
    security(("bearer" = [])),
    params(("name" = String, Path), ("version" = String, Path), KindQuery),
    request_body(content = Vec<u8>, content_type = "application/wasm",
        description = "The component's bytes"),
    responses(
        (status = 200, description = "Registered and active", body = ComponentView),
        (status = 400, description = "Not a valid component of its kind", body = ErrorBody),
        (status = 409, description = "This version is registered with other bytes, or the codec \
            declares a protocol another codec speaks", body = ErrorBody),
        (status = 422, description = "It would break a pipeline or a device, or no longer speak a \
            protocol devices use (they are named); the previous version stays", body = ErrorBody)))]
pub async fn upload(
    State(state): State<ApiState>,
    _admin: Admin,
    Path((name, version)): Path<(String, String)>,
    Query(query): Query<KindQuery>,
    body: Bytes,
) -> ApiReply {
    let known = state
        .deployer
        .list()
        .into_iter()
        .find(|c| c.name == name)
        .map(|c| c.kind);
    let kind = match (query.kind.as_deref().map(ComponentKind::parse), known) {
        (Some(Some(kind)), _) | (None, Some(kind)) => kind,
        (Some(None), _) => {
            return error(
                StatusCode::BAD_REQUEST,
                "`kind` is one of codec, stage, rules, decoder",
            );
        }
        (None, None) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("`{name}` is new: say its kind with ?kind=codec|stage|rules|decoder"),
            );
        }
    };
    blocking(&state.deployer, move |d| {
        d.upload(kind, &name, &version, &body)
    })
    .await
}

/// `POST /reload`: reads the pipeline files, then the device configuration, again
/// now (the engine also watches them). `{pipelines: {swapped}, devices: {added,
/// changed, removed, unchanged, restartNeeded}}`; a part that was refused has
/// `{error}` instead (every problem with its position) and the answer is 422.
#[utoipa::path(post, path = "/reload", tag = "components", security(("bearer" = [])),
    responses(
        (status = 200, description = "Both parts reloaded", body = ReloadReply),
        (status = 422, description = "A part was refused; it says why", body = ReloadReply)))]
pub async fn reload(State(state): State<ApiState>, _admin: Admin) -> ApiReply {
    let deployer = Arc::clone(&state.deployer);
    let report = match tokio::task::spawn_blocking(move || deployer.reload()).await {
        Ok(report) => report,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let mut status = StatusCode::OK;
    let mut refused = |e: DeployError| {
        status = status.max(deploy_status(&e));
        ErrorBody {
            error: e.to_string(),
        }
    };
    let pipelines = report.pipelines.map(|r| match r {
        Ok(swapped) => PipelinesReloaded::Done { swapped },
        Err(e) => PipelinesReloaded::Refused(refused(e)),
    });
    let devices = report.devices.map(|r| match r {
        Ok(reload) => DevicesReloaded::Done(DevicesChanged {
            added: reload.changes.added,
            changed: reload.changes.changed,
            removed: reload.changes.removed,
            unchanged: reload.changes.unchanged,
            restart_needed: reload.changes.restart_needed,
            conflicts: reload.conflicts,
        }),
        Err(e) => DevicesReloaded::Refused(refused(e)),
    });
    json(status, ReloadReply { pipelines, devices })
}

/// `DELETE /components/{name}/{version}`: an inactive version, or the only
/// version of a component nothing uses.
#[utoipa::path(delete, path = "/components/{name}/{version}", tag = "components",
    security(("bearer" = [])),
    params(("name" = String, Path), ("version" = String, Path)),
    responses(
        (status = 200, description = "Removed", body = ComponentView),
        (status = 400, description = "No such version, the engine's own build, or the active \
            version of a component with others", body = ErrorBody),
        (status = 422, description = "Devices or pipelines use it (they are named)",
            body = ErrorBody)))]
pub async fn remove(
    State(state): State<ApiState>,
    _admin: Admin,
    Path((name, version)): Path<(String, String)>,
) -> ApiReply {
    blocking(&state.deployer, move |d| d.remove(&name, &version)).await
}

#[utoipa::path(post, path = "/components/{name}/{version}/activate", tag = "components",
    security(("bearer" = [])),
    params(("name" = String, Path), ("version" = String, Path)),
    responses(
        (status = 200, description = "Active again", body = ComponentView),
        (status = 400, description = "No such version registered", body = ErrorBody),
        (status = 409, description = "It declares a protocol another codec speaks", body = ErrorBody),
        (status = 422, description = "It would break a pipeline or a device, or no longer speak a \
            protocol devices use (they are named)", body = ErrorBody)))]
pub async fn activate(
    State(state): State<ApiState>,
    _admin: Admin,
    Path((name, version)): Path<(String, String)>,
) -> ApiReply {
    blocking(&state.deployer, move |d| d.activate(&name, &version)).await
}
