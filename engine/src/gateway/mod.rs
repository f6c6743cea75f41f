//! One gateway: its configuration compiled with the components it runs (the
//! built-in ones and those deployed into its data directory), and everything
//! `sluice run` starts, wired together.

mod admin_token;
mod compile;
mod identity;
mod kept;
#[cfg(test)]
mod openapi_document;
mod run;
mod state;
mod systemd;

pub use admin_token::ADMIN_TOKEN_FILE;
pub use compile::{COMPONENT_CACHE_VAR, Prepared, Purpose, Refusal, compile, registry};
pub use run::run;
