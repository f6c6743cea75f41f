//! The WIT glue of a codec crate, written once: [`codec_component!`] in the
//! crate root, [`range_session!`] for a codec whose requests are ranges and,
//! for native tests with the `fuzz` feature, `codec_test_kit!`.

/// Generates, in a codec crate's root, the bindings of the WIT `codec` world
/// exported for `$session`, the guest runtime (outside tests), the conversions
/// of [`wit_conversions!`](crate::wit_conversions) and the helpers every codec
/// uses to build its answers and its declaration. Invoke once, after `extern
/// crate alloc;`; the crate root defines `fn protocols() ->
/// Vec<ProtocolDeclaration>`, what the codec speaks (WIT `describe`). The WIT
/// is read from `$wit`, a path from the crate's folder: the repository's `wit/`
/// when none is given.
#[macro_export]
#[allow(clippy::crate_in_macro_def)] // `crate` is the codec's crate, as meant.
macro_rules! codec_component {
    ($session:ident) => {
        $crate::codec_component!($session, "../../../wit");
    };
    ($session:ident, $wit:tt) => {
        #[cfg(not(any(test, feature = "native")))]
        $crate::guest_runtime!();

        wit_bindgen::generate!({
            world: "codec",
            path: $wit,
            additional_derives: [PartialEq],
        });

        #[allow(unused_imports)]
        use exports::sluice::dataflow::protocol::{
            DeviceError, FrameError, FrameSize, Guest, GuestSession, IntegerRange, PlannedRead,
            ProtocolDeclaration, Session, SettingDeclaration, SettingType, Transport,
        };

        struct Component;

        impl Guest for Component {
            type Session = $session;

            fn describe() -> alloc::vec::Vec<ProtocolDeclaration> {
                protocols()
            }
        }

        $crate::wit_conversions!();
        $crate::codec_helpers!();

        // A native build (the fuzz targets') links several codecs into one
        // binary: their exports would clash, and nothing there calls them.
        #[cfg(not(feature = "native"))]
        export!(Component);

        /// The session as native code, for the fuzz targets (`native` feature).
        #[cfg(all(feature = "native", not(test)))]
        pub mod native {
            $crate::codec_test_kit!($session);

            /// A session of `settings`, each value as text (`true`, `false`, an
            /// integer or text), and `tags`, a list like `D0 INT16, D20 STRING(5)`.
            ///
            /// # Errors
            /// What the codec refuses in the configuration.
            ///
            /// # Panics
            /// When `tags` is not such a list.
            pub fn open(
                settings: &[(&str, &str)],
                tags: &str,
            ) -> Result<impl $crate::fuzz::Codec + use<>, alloc::string::String> {
                use crate::sluice::dataflow::types::SettingValue;
                let settings: alloc::vec::Vec<_> = settings
                    .iter()
                    .map(|(key, value)| {
                        let value = match *value {
                            "true" => SettingValue::Boolean(true),
                            "false" => SettingValue::Boolean(false),
                            text => text
                                .parse()
                                .map_or_else(|_| SettingValue::Text(text.into()), SettingValue::Int),
                        };
                        setting(key, value)
                    })
                    .collect();
                crate::$session::create(&settings, specs(tags))
                    .map_err(|errors| alloc::format!("{errors:?}"))
            }
        }
    };
}

/// The helpers of [`codec_component!`].
#[doc(hidden)]
#[macro_export]
macro_rules! codec_helpers {
    () => {
        /// Bytes that are not a valid answer: the stream can no longer be trusted.
        fn malformed(message: alloc::string::String) -> FrameError {
            FrameError::Malformed(message)
        }

        /// The WIT `frame-error` of a refused call.
        fn frame_error(failure: $crate::session::Failure) -> FrameError {
            match failure {
                $crate::session::Failure::Malformed(message) => FrameError::Malformed(message),
                $crate::session::Failure::Device {
                    code,
                    message,
                    retry,
                } => FrameError::Device(DeviceError {
                    code,
                    message,
                    retry: planned_reads(retry),
                }),
            }
        }

        /// The planned reads the engine gets for the kit's planned requests.
        fn planned_reads(
            planned: alloc::vec::Vec<$crate::session::Planned>,
        ) -> alloc::vec::Vec<PlannedRead> {
            planned
                .into_iter()
                .map(|p| PlannedRead {
                    id: p.id,
                    tags: p.tags,
                })
                .collect()
        }

        /// One sample of a batch, as a codec builds it (a batch crosses the
        /// boundary as columns, see `batch_from_samples`).
        #[derive(Debug, Clone, PartialEq)]
        pub struct Sample {
            pub tag: u32,
            pub value: sluice::dataflow::types::Value,
            pub quality: $crate::columns::Quality,
            pub ts_ms: i64,
        }

        /// A sample of `tag`: good with a value, bad without one.
        #[allow(dead_code)]
        fn sample(tag: u32, value: Option<sluice::dataflow::types::Value>, ts_ms: i64) -> Sample {
            use $crate::columns::Quality;
            Sample {
                tag,
                quality: if value.is_some() {
                    Quality::Good
                } else {
                    Quality::Bad
                },
                value: value.unwrap_or(sluice::dataflow::types::Value::None),
                ts_ms,
            }
        }

        /// A batch of `samples`, whose spans point into `bytes`.
        #[allow(dead_code)]
        fn batch_from_samples(
            samples: alloc::vec::Vec<Sample>,
            bytes: alloc::vec::Vec<u8>,
        ) -> sluice::dataflow::types::Batch {
            use sluice::dataflow::types::Value;
            use $crate::columns::Cell;
            let mut columns = $crate::columns::Columns {
                bytes,
                ..$crate::columns::Columns::with_capacity(samples.len())
            };
            for sample in samples {
                if let Value::Array(_) = &sample.value {
                    let numbers = numbers_from_array(&sample.value).unwrap_or_default();
                    columns.push_array(sample.tag, numbers, sample.ts_ms);
                    continue;
                }
                let cell = match &sample.value {
                    Value::None | Value::Array(_) => Cell::None,
                    Value::Raw(span) => Cell::Raw {
                        start: span.start,
                        len: span.len,
                    },
                    Value::Boolean(v) => Cell::Boolean(*v),
                    Value::Int(v) => Cell::Int(*v),
                    Value::Uint(v) => Cell::Uint(*v),
                    Value::Float(v) => Cell::Float(*v),
                    Value::Text(text) => Cell::Text(text),
                };
                columns.push_cell(sample.tag, sample.quality, cell, sample.ts_ms);
            }
            columns_into_batch(columns)
        }

        /// The samples of a batch, row by row (for tests; a sample past a short
        /// column is left out).
        #[allow(dead_code)]
        fn batch_samples(batch: &sluice::dataflow::types::Batch) -> alloc::vec::Vec<Sample> {
            use sluice::dataflow::types::{Element, Span, Value};
            use $crate::columns::{Cell, Quality};
            let columns = columns_from_batch(batch.clone());
            let element = |e: usize| match columns.element(e) {
                Cell::Boolean(v) => Element::Boolean(v),
                Cell::Int(v) => Element::Int(v),
                Cell::Uint(v) => Element::Uint(v),
                Cell::Float(v) => Element::Float(v),
                // Not an element kind: only a faulty batch has one.
                _ => Element::Float(f64::NAN),
            };
            (0..columns.rows())
                .map(|i| Sample {
                    tag: columns.tags[i],
                    value: match columns.cell(i) {
                        Cell::Array { .. } => Value::Array(
                            columns
                                .array_range(i)
                                .unwrap_or_default()
                                .map(element)
                                .collect(),
                        ),
                        Cell::None => Value::None,
                        Cell::Raw { start, len } => Value::Raw(Span { start, len }),
                        Cell::Boolean(v) => Value::Boolean(v),
                        Cell::Int(v) => Value::Int(v),
                        Cell::Uint(v) => Value::Uint(v),
                        Cell::Float(v) => Value::Float(v),
                        Cell::Text(v) => Value::Text(v.into()),
                    },
                    quality: Quality::from_code(columns.qualities[i]),
                    ts_ms: columns.ts_ms[i],
                })
                .collect()
        }

        /// A channel setting of `name`, valued as `kind` says, `default` when a
        /// channel leaves it out.
        #[allow(dead_code)]
        fn declare(
            name: &str,
            kind: SettingType,
            default: Option<sluice::dataflow::types::SettingValue>,
            help: &str,
        ) -> SettingDeclaration {
            SettingDeclaration {
                name: name.into(),
                type_: kind,
                default,
                help: help.into(),
            }
        }

        /// A whole number from `min` to `max`.
        #[allow(dead_code)]
        fn integers(min: i64, max: i64) -> SettingType {
            SettingType::Integer(IntegerRange { min, max })
        }

        /// One of `names`.
        #[allow(dead_code)]
        fn choices(names: &[&str]) -> SettingType {
            SettingType::Choice(names.iter().map(|n| (*n).into()).collect())
        }

        /// The text value `name`, for a default.
        #[allow(dead_code)]
        fn text(name: &str) -> Option<sluice::dataflow::types::SettingValue> {
            Some(sluice::dataflow::types::SettingValue::Text(name.into()))
        }

        /// The integer value `value`, for a default.
        #[allow(dead_code)]
        fn int(value: i64) -> Option<sluice::dataflow::types::SettingValue> {
            Some(sluice::dataflow::types::SettingValue::Int(value))
        }

        /// Reads each channel setting with `apply`, which gives the message of a
        /// setting it refuses; the refusals go to `errors`.
        fn each_setting(
            settings: &[sluice::dataflow::types::Setting],
            errors: &mut alloc::vec::Vec<sluice::dataflow::types::ConfigError>,
            mut apply: impl FnMut(
                &str,
                &$crate::settings::SettingValue<'_>,
            ) -> Result<(), alloc::string::String>,
        ) {
            for setting in settings {
                let key = setting.key.as_str();
                if let Err(message) = apply(key, &setting_value(setting)) {
                    errors.push(config_error(None, key, message));
                }
            }
        }
    };
}

/// Generates the WIT session of `$session`, a range codec (see
/// [`session::range_codec`](crate::session::range_codec)) without a handshake,
/// named `$protocol` in messages. `$session` has a constructor
/// `create(&[Setting], Vec<TagSpec>) -> Result<Self, Vec<ConfigError>>`.
/// Invoke after [`codec_component!`].
#[macro_export]
macro_rules! range_session {
    ($session:ident, $protocol:literal) => {
        impl GuestSession for $session {
            fn open(
                settings: alloc::vec::Vec<sluice::dataflow::types::Setting>,
                tags: alloc::vec::Vec<sluice::dataflow::types::TagSpec>,
            ) -> Result<Session, alloc::vec::Vec<sluice::dataflow::types::ConfigError>> {
                $session::create(&settings, tags).map(Session::new)
            }

            fn header_len(&self) -> u32 {
                $crate::session::range_codec::RangeCodec::head_len(self) as u32
            }

            fn frame_length(&self, head: alloc::vec::Vec<u8>) -> Result<FrameSize, FrameError> {
                $crate::session::range_codec::RangeCodec::total_len(self, &head)
                    .map(FrameSize::Length)
                    .map_err(malformed)
            }

            fn lease_seconds(&self) -> Option<u32> {
                None
            }

            fn handshake(&self, _step: u32) -> Option<alloc::vec::Vec<u8>> {
                None
            }

            fn check_handshake(
                &self,
                step: u32,
                _frame: alloc::vec::Vec<u8>,
            ) -> Result<(), FrameError> {
                Err(malformed(alloc::format!(
                    concat!($protocol, " has no handshake step {}"),
                    step
                )))
            }

            fn plan(&self, due: alloc::vec::Vec<u32>) -> alloc::vec::Vec<PlannedRead> {
                planned_reads($crate::session::range_codec::plan(self, due))
            }

            fn encode_read(&self, request: u32) -> Result<alloc::vec::Vec<u8>, FrameError> {
                $crate::session::range_codec::encode_read(self, request).map_err(frame_error)
            }

            fn parse_read(
                &self,
                request: u32,
                frame: alloc::vec::Vec<u8>,
                ts_ms: i64,
            ) -> Result<sluice::dataflow::types::Batch, FrameError> {
                $crate::session::range_codec::parse_read(self, request, &frame, ts_ms)
                    .map_err(frame_error)
            }

            fn encode_write(
                &self,
                tag: u32,
                value: sluice::dataflow::types::Value,
            ) -> Result<alloc::vec::Vec<u8>, FrameError> {
                $crate::session::range_codec::encode_write(self, tag, &value).map_err(frame_error)
            }

            fn check_write(&self, frame: alloc::vec::Vec<u8>) -> Result<(), FrameError> {
                $crate::session::range_codec::check_write(self, &frame).map_err(frame_error)
            }

            fn reset(&self) {
                $crate::session::range_codec::reset(self)
            }
        }
    };
}

/// Generates, in a codec's test module, the fixtures its tests share with the
/// other codecs' (`spec`, `string`, `specs`, `setting`) and the
/// [`fuzz::Codec`](crate::fuzz::Codec) of `$session`, for
/// [`fuzz::run`](crate::fuzz::run).
#[cfg(feature = "fuzz")]
#[macro_export]
#[allow(clippy::crate_in_macro_def)] // `crate` is the codec's crate, as meant.
macro_rules! codec_test_kit {
    ($session:ident) => {
        #[allow(unused_imports)]
        use test_kit::{setting, spec, specs, string};

        /// The fixtures of the codecs' tests and the fuzz harness's view of a session.
        mod test_kit {
            use crate::Sample;
            use crate::sluice::dataflow::types::{
                Access, ByteOrder, DataType, Setting, SettingValue, TagSpec, Value,
            };
            use crate::{FrameError, GuestSession, PlannedRead};
            use $crate::fuzz::{Codec, Decoded, Sample as Seen, Size};
            use $crate::numeric::Number;
            use $crate::session::{Failure, Planned};

            /// A read-write tag of `data_type` at `address`, keyed by its address.
            pub fn spec(address: &str, data_type: DataType) -> TagSpec {
                TagSpec {
                    key: address.into(),
                    address: address.into(),
                    data_type,
                    length: 0,
                    byte_order: ByteOrder::Abcd,
                    factor: 1.0,
                    offset: 0.0,
                    deadband: 0.0,
                    access: Access::ReadWrite,
                    settings: Vec::new(),
                }
            }

            /// A STRING tag of `length` characters at `address`.
            pub fn string(address: &str, length: u32) -> TagSpec {
                TagSpec {
                    length,
                    ..spec(address, DataType::String)
                }
            }

            /// Tags from a list like `D0 INT16, D20 STRING(5), M0 BOOL, D30 FLOAT32[4]`:
            /// an address and a data type as the configuration names it,
            /// `STRING(length)`, `TYPE[length]` for an array.
            pub fn specs(list: &str) -> Vec<TagSpec> {
                let tag = |item: &str| {
                    let (address, name) = item.trim().split_once(' ').expect("address and type");
                    let array = name.strip_suffix(']').and_then(|n| n.split_once('['));
                    match name
                        .strip_prefix("STRING(")
                        .and_then(|n| n.strip_suffix(')'))
                    {
                        Some(length) => string(address, length.parse().expect("a length")),
                        None => match array {
                            Some((name, length)) => TagSpec {
                                length: length.parse().expect("a length"),
                                ..spec(address, data_type(name))
                            },
                            None => spec(address, data_type(name)),
                        },
                    }
                };
                list.split(',').map(tag).collect()
            }

            fn data_type(name: &str) -> DataType {
                match name {
                    "BOOL" => DataType::Bool,
                    "INT16" => DataType::Int16,
                    "UINT16" => DataType::Uint16,
                    "INT32" => DataType::Int32,
                    "UINT32" => DataType::Uint32,
                    "INT64" => DataType::Int64,
                    "UINT64" => DataType::Uint64,
                    "FLOAT32" => DataType::Float32,
                    "FLOAT64" => DataType::Float64,
                    "BCD16" => DataType::Bcd16,
                    "BCD32" => DataType::Bcd32,
                    other => panic!("unknown data type {other}"),
                }
            }

            pub fn setting(key: &str, value: SettingValue) -> Setting {
                Setting {
                    key: key.into(),
                    value,
                }
            }

            /// The kit's failure of a WIT `frame-error`.
            fn failure(error: FrameError) -> Failure {
                match error {
                    FrameError::Malformed(message) => Failure::Malformed(message),
                    FrameError::Device(error) => Failure::Device {
                        code: error.code,
                        message: error.message,
                        retry: error.retry.into_iter().map(planned).collect(),
                    },
                }
            }

            fn planned(read: PlannedRead) -> Planned {
                Planned {
                    id: read.id,
                    tags: read.tags,
                }
            }

            fn seen(sample: &Sample) -> Seen {
                Seen {
                    tag: sample.tag,
                    good: sample.quality == $crate::columns::Quality::Good,
                    value: crate::number_from_value(&sample.value),
                    span: match sample.value {
                        Value::Raw(span) => Some((span.start, span.len)),
                        _ => None,
                    },
                }
            }

            impl Codec for crate::$session {
                fn header_len(&self) -> u32 {
                    GuestSession::header_len(self)
                }

                fn frame_length(&self, head: Vec<u8>) -> Result<Size, Failure> {
                    match GuestSession::frame_length(self, head).map_err(failure)? {
                        crate::FrameSize::Length(len) => Ok(Size::Length(len)),
                        crate::FrameSize::Skip(len) => Ok(Size::Skip(len)),
                        crate::FrameSize::Need(len) => Ok(Size::Need(len)),
                    }
                }

                fn handshake(&self, step: u32) -> Option<Vec<u8>> {
                    GuestSession::handshake(self, step)
                }

                fn check_handshake(&self, step: u32, frame: Vec<u8>) -> Result<(), Failure> {
                    GuestSession::check_handshake(self, step, frame).map_err(failure)
                }

                fn plan(&self, due: Vec<u32>) -> Vec<Planned> {
                    GuestSession::plan(self, due)
                        .into_iter()
                        .map(planned)
                        .collect()
                }

                fn encode_read(&self, request: u32) -> Result<Vec<u8>, Failure> {
                    GuestSession::encode_read(self, request).map_err(failure)
                }

                fn parse_read(
                    &self,
                    request: u32,
                    frame: Vec<u8>,
                    ts_ms: i64,
                ) -> Result<Decoded, Failure> {
                    let batch =
                        GuestSession::parse_read(self, request, frame, ts_ms).map_err(failure)?;
                    Ok(Decoded {
                        samples: crate::batch_samples(&batch).iter().map(seen).collect(),
                        bytes: batch.bytes,
                    })
                }

                fn encode_write(&self, tag: u32, value: Number) -> Result<Vec<u8>, Failure> {
                    let value = crate::number_to_value(value);
                    GuestSession::encode_write(self, tag, value).map_err(failure)
                }

                fn check_write(&self, frame: Vec<u8>) -> Result<(), Failure> {
                    GuestSession::check_write(self, frame).map_err(failure)
                }

                fn reset(&self) {
                    GuestSession::reset(self)
                }
            }
        }
    };
}
