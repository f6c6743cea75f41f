//! Decoders (WIT `decoder` world) in plain Rust: the [`Decoder`] trait a decoder
//! crate implements, what it knows of each tag ([`Field`]), and the WIT glue,
//! written once: [`decoder_component!`].

use alloc::string::String;
use alloc::vec::Vec;

use crate::columns::{Columns, kind, quality};
use crate::numeric::{self, DataType, Number};
use crate::settings::{SettingValue, wrong_type};
use crate::stages::{Issue, Settings, Tag};

/// What a decoder knows of one tag.
#[derive(Debug, Clone)]
pub struct Field<'a> {
    pub key: &'a str,
    /// Where the tag's value is in a message, in the decoder's own syntax.
    pub address: &'a str,
    /// Its type, array length, byte order, scaling and further keys.
    pub tag: Tag<'a>,
    /// Whether a message should carry it (`R` or `RW`).
    pub readable: bool,
    /// Whether it may be written (`W` or `RW`).
    pub writable: bool,
}

/// Why a message gave a tag (or, with no tag, every tag) no value.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub tag: Option<u32>,
    pub message: String,
}

/// A message to publish.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    pub topic: String,
    pub payload: Vec<u8>,
}

/// A value to write: one, or an array tag's elements.
#[derive(Debug, Clone, PartialEq)]
pub enum Written {
    One(Number),
    Array(Vec<Number>),
}

/// A decoder configured for one device's tags.
pub trait Decoder: Sized {
    /// Checks the settings and the tags' addresses.
    ///
    /// # Errors
    /// Every mistake found.
    fn create(settings: &Settings<'_>, fields: &[Field<'_>]) -> Result<Self, Vec<Issue>>;

    /// Decodes a message that arrived on `topic`: a sample per tag it gives a
    /// value into `out` (stamped `ts_ms`), a refusal per tag it should have
    /// and did not into `refusals`.
    fn decode(
        &self,
        topic: &str,
        payload: &[u8],
        ts_ms: i64,
        out: &mut Columns,
        refusals: &mut Vec<Refusal>,
    );

    /// The message that writes `value` to tag `tag`.
    ///
    /// # Errors
    /// Why it cannot be written, in words for the command's reply.
    fn encode(&self, tag: u32, value: &Written) -> Result<Outgoing, String>;
}

/// The `commandTopic` setting the engine hands every decoder (the channel's,
/// its placeholders filled in): where its writes go.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CommandTopic(Option<String>);

impl CommandTopic {
    /// Takes setting `key` if it is `commandTopic`; `false` for any other key.
    pub fn take(&mut self, key: &str, value: &SettingValue<'_>, issues: &mut Vec<Issue>) -> bool {
        if key != "commandTopic" {
            return false;
        }
        match value {
            SettingValue::Text(topic) => self.0 = Some((*topic).into()),
            other => issues.push(Issue::new(None, key, wrong_type(key, "text", other))),
        }
        true
    }

    /// Where a write goes.
    ///
    /// # Errors
    /// The channel has none: its devices take no writes.
    pub fn topic(&self) -> Result<String, String> {
        self.0
            .clone()
            .ok_or_else(|| "the channel has no `commandTopic`: its devices take no writes".into())
    }
}

/// `value` as a value of `data_type`: checked against the type's range and
/// kind, then made what a register of that type decodes to (a FLOAT32 rounded
/// to single precision, a BCD its digits' value, a BOOL true or false).
///
/// # Errors
/// Why it is not a value of the type, in words.
pub fn typed(data_type: DataType, value: &Number) -> Result<Number, String> {
    if let (DataType::String(chars), Number::Text(text)) = (data_type, value)
        && text.len() > chars as usize
    {
        return Err(alloc::format!(
            "{} is longer than the tag's {chars} characters",
            shown(value)
        ));
    }
    let bytes = numeric::encode(data_type, value).map_err(|error| match error {
        numeric::EncodeError::OutOfRange => {
            alloc::format!(
                "{} is out of the range of {}",
                shown(value),
                data_type.name()
            )
        }
        numeric::EncodeError::WrongKind => {
            alloc::format!("{} is not a value of {}", shown(value), data_type.name())
        }
    })?;
    numeric::decode(data_type, &bytes)
        .map_err(|_| alloc::format!("{} is not a value of {}", shown(value), data_type.name()))
}

/// What the engine does with a message's refusals (PUSH-2 of the engine's
/// `docs/push.md`), for a decoder that runs the stages itself (`ingest`): each
/// `readable` tag refused (every one, for a refusal of the whole message) that
/// has no sample in `out` gets a BAD one stamped `ts_ms`, in tag order.
pub fn mark_refused(out: &mut Columns, refusals: &[Refusal], readable: &[u32], ts_ms: i64) {
    let mut refused: Vec<u32> = Vec::new();
    for refusal in refusals {
        match refusal.tag {
            Some(tag) if readable.contains(&tag) => refused.push(tag),
            Some(_) => {}
            None => refused.extend_from_slice(readable),
        }
    }
    refused.sort_unstable();
    refused.dedup();
    for tag in refused {
        if !out.tags.contains(&tag) {
            out.push(tag, quality::BAD, kind::NONE, 0, ts_ms);
        }
    }
}

/// A value as a message would show it.
fn shown(value: &Number) -> String {
    match value {
        Number::Bool(v) => alloc::format!("{v}"),
        Number::Int(v) => alloc::format!("{v}"),
        Number::Uint(v) => alloc::format!("{v}"),
        Number::Float(v) => alloc::format!("{v:?}"),
        Number::Text(v) => alloc::format!("{v:?}"),
    }
}

/// Generates, in a decoder crate's root, the bindings of the WIT `decoder`
/// world exported for `$decoder` (a [`Decoder`]), the guest runtime (outside
/// tests) and the conversions of [`wit_conversions!`](crate::wit_conversions).
/// Invoke once, after `extern crate alloc;`. The WIT is read from `$wit`, a
/// path from the crate's folder: the repository's `wit/` when none is given.
#[macro_export]
macro_rules! decoder_component {
    ($decoder:ty) => {
        $crate::decoder_component!($decoder, "../../../wit");
    };
    ($decoder:ty, $wit:tt) => {
        #[cfg(not(test))]
        $crate::guest_runtime!();

        wit_bindgen::generate!({ world: "decoder", path: $wit });

        $crate::decoder_exports!($decoder);

        export!(Component);
    };
}

/// [`decoder_component!`] for the decoders the engine ships: the WIT
/// `builtin-decoder` world, whose `ingest` runs a message's samples through a
/// [`Chain`](crate::stages::Chain) of the built-in stages in the same call.
#[macro_export]
macro_rules! builtin_decoder_component {
    ($decoder:ty) => {
        #[cfg(not(test))]
        $crate::guest_runtime!();

        wit_bindgen::generate!({ world: "builtin-decoder", path: "../../../wit" });

        $crate::decoder_exports!($decoder);

        use exports::sluice::dataflow::ingest as wit_ingest;

        impl wit_ingest::Guest for Component {
            type Ingester = IngesterResource;
        }

        /// The decoder, the stages behind it and the indexes of its readable tags.
        struct IngesterResource {
            decoder: $decoder,
            chain: $crate::stages::Chain,
            readable: alloc::vec::Vec<u32>,
        }

        impl wit_ingest::GuestIngester for IngesterResource {
            fn create(
                decoder_settings: alloc::vec::Vec<sluice::dataflow::types::Setting>,
                chain_settings: alloc::vec::Vec<sluice::dataflow::types::Setting>,
                tags: alloc::vec::Vec<sluice::dataflow::types::TagSpec>,
            ) -> Result<wit_ingest::Ingester, alloc::vec::Vec<sluice::dataflow::types::ConfigError>> {
                use $crate::decoder::Decoder as _;
                use $crate::stages::Stage as _;
                let fields = decoder_fields(&tags);
                let readable = fields
                    .iter()
                    .enumerate()
                    .filter(|(_, f)| f.readable)
                    .map(|(i, _)| i as u32)
                    .collect();
                let decoder = <$decoder>::create(&stage_settings(&decoder_settings), &fields)
                    .map_err(config_errors)?;
                let stage_tags: alloc::vec::Vec<_> = tags.iter().map(stage_tag).collect();
                let chain = $crate::stages::Chain::create(&stage_settings(&chain_settings), &stage_tags)
                    .map_err(config_errors)?;
                Ok(wit_ingest::Ingester::new(IngesterResource { decoder, chain, readable }))
            }

            fn ingest(
                &self,
                topic: alloc::string::String,
                payload: alloc::vec::Vec<u8>,
                ts_ms: i64,
            ) -> wit_ingest::Ingested {
                use $crate::decoder::Decoder as _;
                use $crate::stages::Stage as _;
                let mut out = $crate::columns::Columns::with_capacity(self.readable.len());
                let mut refusals = alloc::vec::Vec::new();
                self.decoder.decode(&topic, &payload, ts_ms, &mut out, &mut refusals);
                let gave = !out.is_empty();
                $crate::decoder::mark_refused(&mut out, &refusals, &self.readable, ts_ms);
                if out.is_aligned() {
                    self.chain.process(&mut out);
                }
                wit_ingest::Ingested {
                    samples: columns_into_batch(out),
                    gave,
                    refusals: refusals
                        .into_iter()
                        .map(|r| wit_ingest::Refused { tag: r.tag, message: r.message })
                        .collect(),
                }
            }
        }

        export!(Component);
    };
}

/// The `payload` export of [`decoder_component!`] and
/// [`builtin_decoder_component!`], with the conversions of
/// [`wit_conversions!`](crate::wit_conversions): not for use on its own.
#[doc(hidden)]
#[macro_export]
macro_rules! decoder_exports {
    ($decoder:ty) => {
        use exports::sluice::dataflow::payload as wit_payload;

        struct Component;

        impl wit_payload::Guest for Component {
            type Decoder = DecoderResource;
        }

        /// The decoder behind the WIT resource, and its readable tags: room
        /// for as many samples is made before each message is decoded.
        struct DecoderResource($decoder, usize);

        /// What the decoder knows of each tag.
        fn decoder_fields(
            tags: &[sluice::dataflow::types::TagSpec],
        ) -> alloc::vec::Vec<$crate::decoder::Field<'_>> {
            tags.iter()
                .map(|tag| $crate::decoder::Field {
                    key: &tag.key,
                    address: &tag.address,
                    tag: stage_tag(tag),
                    readable: !matches!(tag.access, sluice::dataflow::types::Access::Write),
                    writable: !matches!(tag.access, sluice::dataflow::types::Access::Read),
                })
                .collect()
        }

        impl wit_payload::GuestDecoder for DecoderResource {
            fn create(
                settings: alloc::vec::Vec<sluice::dataflow::types::Setting>,
                tags: alloc::vec::Vec<sluice::dataflow::types::TagSpec>,
            ) -> Result<wit_payload::Decoder, alloc::vec::Vec<sluice::dataflow::types::ConfigError>>
            {
                use $crate::decoder::Decoder as _;
                let fields = decoder_fields(&tags);
                let readable = fields.iter().filter(|f| f.readable).count();
                <$decoder>::create(&stage_settings(&settings), &fields)
                    .map(|decoder| wit_payload::Decoder::new(DecoderResource(decoder, readable)))
                    .map_err(config_errors)
            }

            fn decode(
                &self,
                topic: alloc::string::String,
                payload: alloc::vec::Vec<u8>,
                ts_ms: i64,
            ) -> wit_payload::Decoded {
                use $crate::decoder::Decoder as _;
                let mut out = $crate::columns::Columns::with_capacity(self.1);
                let mut refusals = alloc::vec::Vec::new();
                self.0
                    .decode(&topic, &payload, ts_ms, &mut out, &mut refusals);
                wit_payload::Decoded {
                    samples: columns_into_batch(out),
                    refusals: refusals
                        .into_iter()
                        .map(|r| wit_payload::Refusal {
                            tag: r.tag,
                            message: r.message,
                        })
                        .collect(),
                }
            }

            fn encode(
                &self,
                tag: u32,
                value: sluice::dataflow::types::Value,
            ) -> Result<wit_payload::Outgoing, alloc::string::String> {
                use $crate::decoder::Decoder as _;
                let written = match numbers_from_array(&value) {
                    Some(numbers) => $crate::decoder::Written::Array(numbers),
                    None => $crate::decoder::Written::One(
                        number_from_value(&value).ok_or("no value to write")?,
                    ),
                };
                self.0.encode(tag, &written).map(|o| wit_payload::Outgoing {
                    topic: o.topic,
                    payload: o.payload,
                })
            }
        }

        $crate::wit_conversions!();
    };
}

#[cfg(test)]
mod tests {
    use alloc::string::ToString;

    use super::{Refusal, mark_refused};
    use crate::columns::{Columns, quality};
    use crate::numeric::Number;

    fn refusal(tag: Option<u32>) -> Refusal {
        Refusal {
            tag,
            message: "no value".to_string(),
        }
    }

    #[test]
    fn refused_readable_tags_without_a_value_get_a_bad_sample_in_tag_order() {
        let mut out = Columns::default();
        out.push_number(1, Number::Int(5), 7);
        // Tag 2 is not readable; tag 1 has a value; tag 3 is refused twice.
        let refusals = [
            refusal(Some(3)),
            refusal(Some(1)),
            refusal(Some(2)),
            refusal(Some(3)),
        ];
        mark_refused(&mut out, &refusals, &[0, 1, 3], 9);
        assert_eq!(out.tags, [1, 3]);
        assert_eq!(out.qualities, [quality::GOOD, quality::BAD]);
        assert_eq!(out.ts_ms, [7, 9]);

        // A refusal of the whole message: every readable tag.
        let mut out = Columns::default();
        mark_refused(&mut out, &[refusal(None)], &[0, 1, 3], 9);
        assert_eq!(out.tags, [0, 1, 3]);
        assert!(out.qualities.iter().all(|q| *q == quality::BAD));
    }
}
