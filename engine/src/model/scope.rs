//! Whose records a caller may see and touch: the operator sees every tenant, a
//! tenant's token only that tenant.

/// Whose alarms, commands and devices a caller may see and touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The operator: every tenant.
    All,
    Tenant(u32),
}

impl Scope {
    /// The one tenant it sees, if it is a tenant's.
    pub fn tenant(self) -> Option<u32> {
        match self {
            Scope::All => None,
            Scope::Tenant(id) => Some(id),
        }
    }

    pub fn sees(self, tenant_id: u32) -> bool {
        match self {
            Scope::All => true,
            Scope::Tenant(id) => id == tenant_id,
        }
    }
}
