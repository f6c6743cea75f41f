//! Components on a running engine (admin token):
//! - `GET /components`: every registered version, its kind, content hash, and
//!   whether it is active;
//! - `PUT /components/{name}/{version}?kind=stage|codec|rules` with the component's
//!   bytes: compile, check against its world, rebuild every pipeline with it and
//!   swap at each device's next round; a version that breaks a pipeline is
//!   refused (422) and the previous one stays;
//! - `POST /components/{name}/{version}/activate`: make a registered version
//!   active again (rollback);
//! - `POST /reload`: read the pipeline files and the device configuration again now.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::json;

use super::auth::Admin;
use super::reply::{Reply, error};
use super::state::ApiState;
use crate::deploy::{DeployError, Deployer};
use crate::runtime::{ComponentInfo, ComponentKind};

fn view(info: &ComponentInfo) -> serde_json::Value {
    json!({
        "name": info.name,
        "version": info.version,
        "kind": info.kind.as_str(),
        "hash": info.hash,
        "active": info.active,
    })
}

fn deploy_error(e: &DeployError) -> Reply {
    let status = match e {
        DeployError::Invalid(_) | DeployError::Load(_) => StatusCode::BAD_REQUEST,
        DeployError::Breaks(_) | DeployError::Pipelines(_) | DeployError::Devices(_) => {
            StatusCode::UNPROCESSABLE_ENTITY
        }
        DeployError::Storage(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(status, e.to_string())
}

async fn blocking(
    deployer: &Arc<Deployer>,
    call: impl FnOnce(&Deployer) -> Result<ComponentInfo, DeployError> + Send + 'static,
) -> Reply {
    let deployer = Arc::clone(deployer);
    match tokio::task::spawn_blocking(move || call(&deployer)).await {
        Ok(Ok(info)) => (StatusCode::OK, Json(view(&info))),
        Ok(Err(e)) => deploy_error(&e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

pub async fn list(State(state): State<ApiState>, _admin: Admin) -> Reply {
    let components: Vec<_> = state.deployer.list().iter().map(view).collect();
    (StatusCode::OK, Json(json!({ "components": components })))
}

#[derive(Debug, Deserialize)]
pub struct KindQuery {
    kind: Option<String>,
}

pub async fn upload(
    State(state): State<ApiState>,
    _admin: Admin,
    Path((name, version)): Path<(String, String)>,
    Query(query): Query<KindQuery>,
    body: Bytes,
) -> Reply {
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
                "`kind` is one of codec, stage, rules",
            );
        }
        (None, None) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("`{name}` is new: say its kind with ?kind=codec|stage|rules"),
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
pub async fn reload(State(state): State<ApiState>, _admin: Admin) -> Reply {
    let deployer = Arc::clone(&state.deployer);
    let report = match tokio::task::spawn_blocking(move || deployer.reload()).await {
        Ok(report) => report,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let mut status = StatusCode::OK;
    let mut part = |result: Result<serde_json::Value, DeployError>| match result {
        Ok(value) => value,
        Err(e) => {
            let (refused, _) = deploy_error(&e);
            status = status.max(refused);
            json!({ "error": e.to_string() })
        }
    };
    let pipelines = report
        .pipelines
        .map(|r| part(r.map(|swapped| json!({ "swapped": swapped }))));
    let devices = report.devices.map(|r| {
        part(r.map(|reload| {
            let c = &reload.changes;
            json!({
                "added": c.added,
                "changed": c.changed,
                "removed": c.removed,
                "unchanged": c.unchanged,
                "restartNeeded": c.restart_needed,
                "conflicts": reload.conflicts,
            })
        }))
    });
    (
        status,
        Json(json!({ "pipelines": pipelines, "devices": devices })),
    )
}

pub async fn activate(
    State(state): State<ApiState>,
    _admin: Admin,
    Path((name, version)): Path<(String, String)>,
) -> Reply {
    blocking(&state.deployer, move |d| d.activate(&name, &version)).await
}
