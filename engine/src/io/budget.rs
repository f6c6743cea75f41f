//! The connection budget: a global cap and a per-host cap on open connections, so
//! the gateway never exhausts a PLC's few connection slots (or its own sockets).
//! A connection attempt that finds no room fails at once instead of queueing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::ConnectionLimits;
use crate::sync::lock;

/// Room for open connections, shared by every link.
#[derive(Debug, Clone)]
pub struct Budget {
    global: Arc<Semaphore>,
    per_host: Arc<Mutex<HashMap<String, Arc<Semaphore>>>>,
    max_total: usize,
    max_per_host: usize,
}

/// A connection's place in the budget, given back when dropped.
#[derive(Debug)]
pub struct Permit {
    _host: OwnedSemaphorePermit,
    _global: OwnedSemaphorePermit,
}

/// Which cap was reached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetExceeded {
    #[error("the connection budget of {0} connections is used up")]
    Global(usize),
    #[error("the budget of {limit} connections to host {host} is used up")]
    Host { host: String, limit: usize },
}

impl Budget {
    pub fn new(limits: &ConnectionLimits) -> Self {
        Self {
            global: Arc::new(Semaphore::new(limits.max_total as usize)),
            per_host: Arc::default(),
            max_total: limits.max_total as usize,
            max_per_host: limits.max_per_host as usize,
        }
    }

    /// Takes room for one connection to `host`, or says which cap is reached.
    ///
    /// # Errors
    /// When the host's or the global cap is reached.
    pub fn acquire(&self, host: &str) -> Result<Permit, BudgetExceeded> {
        let semaphore = {
            let mut hosts = lock(&self.per_host);
            Arc::clone(
                hosts
                    .entry(host.to_owned())
                    .or_insert_with(|| Arc::new(Semaphore::new(self.max_per_host))),
            )
        };
        let host_permit = semaphore
            .try_acquire_owned()
            .map_err(|_| BudgetExceeded::Host {
                host: host.to_owned(),
                limit: self.max_per_host,
            })?;
        let global_permit = Arc::clone(&self.global)
            .try_acquire_owned()
            .map_err(|_| BudgetExceeded::Global(self.max_total))?;
        Ok(Permit {
            _host: host_permit,
            _global: global_permit,
        })
    }

    /// Connections open now.
    pub fn in_use(&self) -> usize {
        self.max_total - self.global.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_host_and_global_caps_and_release_on_drop() {
        let budget = Budget::new(&ConnectionLimits {
            max_total: 3,
            max_per_host: 2,
        });
        let a1 = budget.acquire("a").expect("room");
        let _a2 = budget.acquire("a").expect("room");
        assert!(matches!(
            budget.acquire("a"),
            Err(BudgetExceeded::Host { limit: 2, .. })
        ));
        let _b1 = budget.acquire("b").expect("room");
        assert_eq!(budget.acquire("b").err(), Some(BudgetExceeded::Global(3)));
        assert_eq!(budget.in_use(), 3);
        drop(a1);
        assert_eq!(budget.in_use(), 2);
        assert!(
            budget.acquire("b").is_ok(),
            "room again once a permit is dropped"
        );
    }
}
