//! The `products` section: defaults shared by every device of a product (the
//! platform's product or profile).
//!
//! ```yaml
//! products:
//!   - productId: P1003
//!     stateTimeout: 30     # lease of its devices, unless a device sets its own
//! ```

use std::collections::HashMap;

use super::read::{list, required_text, text};
use crate::yaml::{Diagnostics, Fields, Node, Pos};

/// One entry of `products`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProductConfig {
    /// `productId`: the product its devices name in their own `productId`.
    pub product_id: String,
    /// `stateTimeout`: the lease, in seconds, of the product's devices that set none.
    pub state_timeout_s: Option<u64>,
    /// `pipeline`: the pipeline of the product's devices that name none.
    pub pipeline: Option<String>,
    /// Where the entry starts.
    pub pos: Pos,
}

pub(super) fn read_all(node: &Node, errors: &mut Diagnostics) -> Vec<ProductConfig> {
    let mut seen: HashMap<String, Pos> = HashMap::new();
    let mut products = Vec::new();
    for item in list(node, "products", errors) {
        let Some(mut fields) = Fields::of(item, "product", errors) else {
            continue;
        };
        let product_id = required_text(&mut fields, "productId", errors);
        let state_timeout_s =
            fields.optional_with("stateTimeout", errors, |node| match node.kind {
                crate::yaml::Kind::Int(seconds) if seconds >= 1 => Ok(seconds as u64),
                _ => Err("expected a number of seconds, 1 or more".to_owned()),
            });
        let pipeline = text(&mut fields, "pipeline", errors);
        let pos = fields.pos();
        fields.finish(errors);
        let Some((product_id, at)) = product_id else {
            continue;
        };
        if let Some(first) = seen.get(&product_id) {
            errors.push(
                at,
                format!("duplicate productId `{product_id}` (first at {first})"),
            );
            continue;
        }
        seen.insert(product_id.clone(), at);
        products.push(ProductConfig {
            product_id,
            state_timeout_s,
            pipeline,
            pos,
        });
    }
    products
}

#[cfg(test)]
mod tests {
    use crate::config::tests::load_str;

    #[test]
    fn products_give_defaults_and_are_checked() {
        let config = load_str(
            "t.yaml",
            "products:\n  - productId: P1\n    stateTimeout: 30\n",
        )
        .expect("valid");
        assert_eq!(
            config.product("P1").and_then(|p| p.state_timeout_s),
            Some(30)
        );
        let errors = load_str(
            "t.yaml",
            "products:\n  - productId: P1\n    stateTimeout: 0\n  - productId: P1\n    colour: red\n",
        )
        .expect_err("three mistakes");
        let text = errors.to_string();
        assert_eq!(errors.len(), 3, "{text}");
        assert!(text.contains("t.yaml:3:19: `stateTimeout`"), "{text}");
        assert!(text.contains("duplicate productId `P1`"), "{text}");
        assert!(text.contains("unknown key `colour`"), "{text}");
    }
}
