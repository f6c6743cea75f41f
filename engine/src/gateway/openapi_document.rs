//! `docs/openapi.json`, which the gateway serves at `GET /openapi.json`, is
//! the description the handlers' annotations give of the routes the gateway
//! puts together (the API's and the console's), each with its access class.
//! `SLUICE_WRITE_OPENAPI=1` writes it anew.

use crate::api::{self, AccessTable, classify, render};

#[test]
fn the_served_document_is_the_one_the_annotations_give() {
    let (_, mut openapi) = api::description()
        .merge(crate::console::description())
        .split_for_parts();
    classify(
        &mut openapi,
        &AccessTable::of(&[api::API_ACCESS, crate::console::ACCESS]),
    );
    let text = render(&openapi).expect("the description renders");
    assert!(
        !text.contains("\"unclassified\""),
        "every route needs its access class in `api::API_ACCESS` or `console::ACCESS`"
    );
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json");
    if std::env::var_os("SLUICE_WRITE_OPENAPI").is_some() {
        std::fs::write(file, &text).expect("write docs/openapi.json");
        return;
    }
    assert!(
        api::openapi_document() == Some(text.as_str()),
        "docs/openapi.json is not what the handlers' annotations describe: run \
         `SLUICE_WRITE_OPENAPI=1 cargo test -p sluice --lib openapi_document` and review the change"
    );
}
