//! The WIT glue of a codec crate, written once: [`codec_component!`] in the
//! crate root, [`no_handshake!`] in its `GuestSession` impl and, for native
//! tests with the `fuzz` feature, `codec_test_kit!`.

/// Generates, in a codec crate's root, the bindings of the WIT `codec` world
/// exported for `$session`, the guest runtime (outside tests), the conversions
/// of [`wit_conversions!`](crate::wit_conversions) and the helpers every codec
/// uses to build its answers. Invoke once, after `extern crate alloc;`.
#[macro_export]
macro_rules! codec_component {
    ($session:ident) => {
        #[cfg(not(test))]
        $crate::guest_runtime!();

        wit_bindgen::generate!({
            world: "codec",
            path: "../../../wit",
            additional_derives: [PartialEq],
        });

        use exports::sluice::dataflow::protocol::{
            DeviceError, FrameError, Guest, GuestSession, PlannedRead, Session,
        };

        struct Component;

        impl Guest for Component {
            type Session = $session;
        }

        $crate::wit_conversions!();
        $crate::codec_helpers!();

        export!(Component);
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

        /// A device error; `retry` holds the smaller requests to try instead.
        fn device_error(
            code: u32,
            message: alloc::string::String,
            retry: alloc::vec::Vec<$crate::session::Planned>,
        ) -> FrameError {
            FrameError::Device(DeviceError {
                code,
                message,
                retry: planned_reads(retry),
            })
        }

        /// A value the codec cannot write to the tag keyed `key` (code 0).
        fn unwritable(key: &str, message: alloc::string::String) -> FrameError {
            device_error(
                0,
                alloc::format!("tag `{key}`: {message}"),
                alloc::vec::Vec::new(),
            )
        }

        /// Tag `tag` of a session's `tags`.
        fn tag_at<T>(tags: &[T], tag: u32) -> Result<&T, FrameError> {
            tags.get(tag as usize)
                .ok_or_else(|| malformed(alloc::format!("unknown tag {tag}")))
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

        /// A sample of `tag`: good with a value, bad without one.
        fn sample(
            tag: u32,
            value: Option<sluice::dataflow::types::Value>,
            ts_ms: i64,
        ) -> sluice::dataflow::types::Sample {
            use sluice::dataflow::types::{Quality, Sample, Value};
            Sample {
                tag,
                quality: if value.is_some() {
                    Quality::Good
                } else {
                    Quality::Bad
                },
                value: value.unwrap_or(Value::None),
                ts_ms,
            }
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

/// The `handshake` and `check-handshake` of a protocol without a handshake,
/// named `$protocol` in the refusal. Invoke inside the `GuestSession` impl.
#[macro_export]
macro_rules! no_handshake {
    ($protocol:literal) => {
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
    };
}

/// Generates, in a codec's test module, the fixtures its tests share with the
/// other codecs' (`spec`, `string`, `setting`) and the [`fuzz::Codec`](crate::fuzz::Codec)
/// of `$session`, for [`fuzz::run`](crate::fuzz::run).
#[cfg(feature = "fuzz")]
#[macro_export]
#[allow(clippy::crate_in_macro_def)] // `crate` is the codec's crate, as meant.
macro_rules! codec_test_kit {
    ($session:ident) => {
        /// A read-write tag of `data_type` at `address`, keyed by its address.
        fn spec(
            address: &str,
            data_type: crate::sluice::dataflow::types::DataType,
        ) -> crate::sluice::dataflow::types::TagSpec {
            crate::sluice::dataflow::types::TagSpec {
                key: address.into(),
                address: address.into(),
                data_type,
                length: 0,
                byte_order: crate::sluice::dataflow::types::ByteOrder::Abcd,
                factor: 1.0,
                offset: 0.0,
                deadband: 0.0,
                access: crate::sluice::dataflow::types::Access::ReadWrite,
                settings: Vec::new(),
            }
        }

        /// A STRING tag of `length` characters at `address`.
        fn string(address: &str, length: u32) -> crate::sluice::dataflow::types::TagSpec {
            crate::sluice::dataflow::types::TagSpec {
                length,
                ..spec(address, crate::sluice::dataflow::types::DataType::String)
            }
        }

        fn setting(
            key: &str,
            value: crate::sluice::dataflow::types::SettingValue,
        ) -> crate::sluice::dataflow::types::Setting {
            crate::sluice::dataflow::types::Setting {
                key: key.into(),
                value,
            }
        }

        fn refusal(error: crate::FrameError) -> $crate::fuzz::Refusal {
            match error {
                crate::FrameError::Malformed(message) => $crate::fuzz::Refusal::Malformed(message),
                crate::FrameError::Device(error) => $crate::fuzz::Refusal::Device {
                    code: error.code,
                    message: error.message,
                    retry: error.retry.into_iter().map(planned).collect(),
                },
            }
        }

        fn planned(read: crate::PlannedRead) -> $crate::session::Planned {
            $crate::session::Planned {
                id: read.id,
                tags: read.tags,
            }
        }

        fn fuzz_sample(sample: &crate::sluice::dataflow::types::Sample) -> $crate::fuzz::Sample {
            use crate::sluice::dataflow::types::{Quality, Value};
            $crate::fuzz::Sample {
                tag: sample.tag,
                good: sample.quality == Quality::Good,
                valued: sample.value != Value::None,
                span: match sample.value {
                    Value::Raw(span) => Some((span.start, span.len)),
                    _ => None,
                },
            }
        }

        impl $crate::fuzz::Codec for $session {
            fn header_len(&self) -> u32 {
                crate::GuestSession::header_len(self)
            }

            fn frame_length(&self, head: Vec<u8>) -> Result<u32, $crate::fuzz::Refusal> {
                crate::GuestSession::frame_length(self, head).map_err(refusal)
            }

            fn handshake(&self, step: u32) -> Option<Vec<u8>> {
                crate::GuestSession::handshake(self, step)
            }

            fn check_handshake(
                &self,
                step: u32,
                frame: Vec<u8>,
            ) -> Result<(), $crate::fuzz::Refusal> {
                crate::GuestSession::check_handshake(self, step, frame).map_err(refusal)
            }

            fn plan(&self, due: Vec<u32>) -> Vec<$crate::session::Planned> {
                crate::GuestSession::plan(self, due)
                    .into_iter()
                    .map(planned)
                    .collect()
            }

            fn encode_read(&self, request: u32) -> Result<Vec<u8>, $crate::fuzz::Refusal> {
                crate::GuestSession::encode_read(self, request).map_err(refusal)
            }

            fn parse_read(
                &self,
                request: u32,
                frame: Vec<u8>,
                ts_ms: i64,
            ) -> Result<$crate::fuzz::Decoded, $crate::fuzz::Refusal> {
                let batch = crate::GuestSession::parse_read(self, request, frame, ts_ms)
                    .map_err(refusal)?;
                Ok($crate::fuzz::Decoded {
                    samples: batch.samples.iter().map(fuzz_sample).collect(),
                    bytes: batch.bytes.len(),
                })
            }

            fn encode_write(
                &self,
                tag: u32,
                value: $crate::numeric::Number,
            ) -> Result<Vec<u8>, $crate::fuzz::Refusal> {
                crate::GuestSession::encode_write(self, tag, crate::number_to_value(value))
                    .map_err(refusal)
            }

            fn check_write(&self, frame: Vec<u8>) -> Result<(), $crate::fuzz::Refusal> {
                crate::GuestSession::check_write(self, frame).map_err(refusal)
            }

            fn reset(&self) {
                crate::GuestSession::reset(self)
            }
        }
    };
}
