//! Runtime support for Sluice's guest components.
//!
//! Guests are `#![no_std]` so they import nothing from WASI: a component gets no
//! files, no network and no clock, only what the engine hands it in a call. This
//! crate supplies what `std` would otherwise provide on wasm32 (an allocator, a
//! panic handler, `cabi_realloc`) plus the pure helpers several components share:
//! number and setting handling, the columns of a batch ([`columns`]), the built-in
//! [`stages`], the [`session`] kit every codec builds on, the WIT glue of a codec
//! crate ([`codec_component!`]), of a stage crate ([`stage_component!`]) and of a
//! decoder crate ([`decoder_component!`], the [`decoder`] trait; the engine's own
//! decoders [`builtin_decoder_component!`]) and, with the
//! `fuzz` feature, the fuzz harness of the codecs' tests.
#![no_std]

extern crate alloc;

mod codec;
pub mod columns;
pub mod decoder;
#[cfg(feature = "fuzz")]
pub mod fuzz;
pub mod numeric;
pub mod session;
pub mod settings;
mod stage;
pub mod stages;

#[doc(hidden)]
pub use dlmalloc;

/// Defines what `std` would provide a wasm guest: the global allocator, a panic
/// handler (a panic traps, so the engine fails that call and rebuilds the
/// instance) and `cabi_realloc`. Invoke once in each component crate, outside
/// tests: `#[cfg(not(test))] sluice_guest::guest_runtime!();`
#[macro_export]
macro_rules! guest_runtime {
    () => {
        #[global_allocator]
        static ALLOCATOR: $crate::dlmalloc::GlobalDlmalloc = $crate::dlmalloc::GlobalDlmalloc;

        #[panic_handler]
        fn on_panic(_: &core::panic::PanicInfo<'_>) -> ! {
            #[cfg(target_arch = "wasm32")]
            core::arch::wasm32::unreachable();
            // Native builds of a component are only checked, never run.
            #[cfg(not(target_arch = "wasm32"))]
            loop {
                core::hint::spin_loop()
            }
        }

        /// Byte comparison the compiler calls for slice equality; `no_std` wasm has
        /// no C library to supply it.
        ///
        /// # Safety
        /// `a` and `b` are valid for reads of `n` bytes.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
            // SAFETY: forwarded unchanged; see `compare_bytes`.
            unsafe { $crate::compare_bytes(a, b, n) }
        }

        /// Equality-only form of `memcmp` that the compiler may call instead.
        ///
        /// # Safety
        /// As for `memcmp`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
            // SAFETY: forwarded unchanged; see `compare_bytes`.
            unsafe { $crate::compare_bytes(a, b, n) }
        }

        /// Allocation entry point of the component model's canonical ABI.
        ///
        /// # Safety
        /// Called by the host only, with a block from this allocator (or null) and its layout.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn cabi_realloc(
            old_ptr: *mut u8,
            old_len: usize,
            align: usize,
            new_len: usize,
        ) -> *mut u8 {
            // SAFETY: forwarded unchanged; see `realloc`.
            unsafe { $crate::realloc(old_ptr, old_len, align, new_len) }
        }
    };
}

/// The body of `cabi_realloc`: allocates, grows or shrinks a block with the global
/// allocator. A failed allocation traps.
///
/// # Safety
/// `old_ptr` is null with `old_len` 0, or a block of the global allocator that was
/// allocated with `old_len` bytes and `align`.
pub unsafe fn realloc(old_ptr: *mut u8, old_len: usize, align: usize, new_len: usize) -> *mut u8 {
    use core::alloc::Layout;
    let Ok(layout) = Layout::from_size_align(new_len, align) else {
        trap()
    };
    let ptr = if old_len == 0 {
        if new_len == 0 {
            return align as *mut u8;
        }
        // SAFETY: the layout has a non-zero size.
        unsafe { alloc::alloc::alloc(layout) }
    } else {
        // SAFETY: the caller passes a block of the global allocator with its old layout.
        unsafe {
            alloc::alloc::realloc(
                old_ptr,
                Layout::from_size_align_unchecked(old_len, align),
                new_len,
            )
        }
    };
    if ptr.is_null() {
        trap()
    }
    ptr
}

/// The body of `memcmp`: compares `n` bytes. Volatile reads keep the compiler
/// from turning the loop back into a call to `memcmp` itself.
///
/// # Safety
/// `a` and `b` are valid for reads of `n` bytes.
pub unsafe fn compare_bytes(a: *const u8, b: *const u8, n: usize) -> i32 {
    for i in 0..n {
        // SAFETY: `i < n` and both pointers are valid for `n` bytes.
        let (x, y) = unsafe { (a.add(i).read_volatile(), b.add(i).read_volatile()) };
        if x != y {
            return i32::from(x) - i32::from(y);
        }
    }
    0
}

/// Stops the call with a trap (a panic when not on wasm).
pub fn trap() -> ! {
    #[cfg(target_arch = "wasm32")]
    core::arch::wasm32::unreachable();
    #[cfg(not(target_arch = "wasm32"))]
    panic!("allocation failed")
}

/// Defines, in a component crate, conversions from its generated WIT types to the
/// helpers of this crate: `tag_data_type(&TagSpec)`, `tag_byte_order(&TagSpec)`,
/// `tag_array_len(&TagSpec)`, `setting_value(&Setting)`, `number_from_value(&Value)`,
/// `numbers_from_array(&Value)`, `number_to_value(Number)`,
/// `stage_settings`, `stage_tag(&TagSpec)`, `process_batch`, `config_error` and `config_errors`.
/// Invoke after `wit_bindgen::generate!`.
#[macro_export]
macro_rules! wit_conversions {
    () => {
        #[allow(dead_code)]
        fn tag_data_type(tag: &sluice::dataflow::types::TagSpec) -> $crate::numeric::DataType {
            use sluice::dataflow::types::DataType as W;
            use $crate::numeric::DataType as D;
            match tag.data_type {
                W::Bool => D::Bool,
                W::Int16 => D::Int16,
                W::Uint16 => D::Uint16,
                W::Int32 => D::Int32,
                W::Uint32 => D::Uint32,
                W::Int64 => D::Int64,
                W::Uint64 => D::Uint64,
                W::Float32 => D::Float32,
                W::Float64 => D::Float64,
                W::Bcd16 => D::Bcd16,
                W::Bcd32 => D::Bcd32,
                W::String => D::String(tag.length),
            }
        }

        /// The elements of an array tag; `None` for a tag of one value.
        #[allow(dead_code)]
        fn tag_array_len(tag: &sluice::dataflow::types::TagSpec) -> Option<u32> {
            $crate::numeric::array_len(tag_data_type(tag), tag.length)
        }

        #[allow(dead_code)]
        fn tag_byte_order(tag: &sluice::dataflow::types::TagSpec) -> $crate::numeric::ByteOrder {
            use sluice::dataflow::types::ByteOrder as W;
            use $crate::numeric::ByteOrder as B;
            match tag.byte_order {
                W::Abcd => B::Abcd,
                W::Badc => B::Badc,
                W::Cdab => B::Cdab,
                W::Dcba => B::Dcba,
                W::Ghefcdab => B::Ghefcdab,
            }
        }

        #[allow(dead_code)]
        fn setting_value(
            setting: &sluice::dataflow::types::Setting,
        ) -> $crate::settings::SettingValue<'_> {
            use sluice::dataflow::types::SettingValue as W;
            use $crate::settings::SettingValue as S;
            match &setting.value {
                W::Boolean(v) => S::Boolean(*v),
                W::Int(v) => S::Int(*v),
                W::Float(v) => S::Float(*v),
                W::Text(v) => S::Text(v),
            }
        }

        #[allow(dead_code)]
        fn number_from_value(
            value: &sluice::dataflow::types::Value,
        ) -> Option<$crate::numeric::Number> {
            use sluice::dataflow::types::Value as W;
            use $crate::numeric::Number as N;
            Some(match value {
                W::Boolean(v) => N::Bool(*v),
                W::Int(v) => N::Int(*v),
                W::Uint(v) => N::Uint(*v),
                W::Float(v) => N::Float(*v),
                W::Text(v) => N::Text(v.clone()),
                W::None | W::Raw(_) | W::Array(_) => return None,
            })
        }

        /// What a write of `value` to a tag of `array_len` elements (`None`:
        /// one value) sends: its one number, or the array's elements.
        ///
        /// # Errors
        /// No value, an array for a tag of one value, a single value for an
        /// array tag, or an array of another length.
        #[allow(dead_code)]
        fn numbers_to_write(
            value: &sluice::dataflow::types::Value,
            array_len: Option<u32>,
        ) -> Result<alloc::vec::Vec<$crate::numeric::Number>, alloc::string::String> {
            match (array_len, numbers_from_array(value)) {
                (None, Some(_)) => Err("the tag holds one value, not an array".into()),
                (None, None) => Ok(alloc::vec![
                    number_from_value(value).ok_or("no value to write")?
                ]),
                (Some(n), Some(numbers)) if numbers.len() == n as usize => Ok(numbers),
                (Some(n), Some(numbers)) => Err(alloc::format!(
                    "the tag is an array of {n} values, the write has {}",
                    numbers.len()
                )),
                (Some(n), None) => Err(alloc::format!(
                    "the tag is an array of {n} values: write an array"
                )),
            }
        }

        /// The elements of an array value; `None` for any other value.
        #[allow(dead_code)]
        fn numbers_from_array(
            value: &sluice::dataflow::types::Value,
        ) -> Option<alloc::vec::Vec<$crate::numeric::Number>> {
            use sluice::dataflow::types::{Element as E, Value as W};
            use $crate::numeric::Number as N;
            let W::Array(elements) = value else {
                return None;
            };
            Some(
                elements
                    .iter()
                    .map(|element| match *element {
                        E::Boolean(v) => N::Bool(v),
                        E::Int(v) => N::Int(v),
                        E::Uint(v) => N::Uint(v),
                        E::Float(v) => N::Float(v),
                    })
                    .collect(),
            )
        }

        #[allow(dead_code)]
        fn number_to_value(number: $crate::numeric::Number) -> sluice::dataflow::types::Value {
            use sluice::dataflow::types::Value as W;
            use $crate::numeric::Number as N;
            match number {
                N::Bool(v) => W::Boolean(v),
                N::Int(v) => W::Int(v),
                N::Uint(v) => W::Uint(v),
                N::Float(v) => W::Float(v),
                N::Text(v) => W::Text(v),
            }
        }

        /// The columns of a batch, moved out of the generated record.
        #[allow(dead_code)]
        fn columns_from_batch(batch: sluice::dataflow::types::Batch) -> $crate::columns::Columns {
            $crate::columns::Columns {
                tags: batch.tags,
                qualities: batch.qualities,
                kinds: batch.kinds,
                bits: batch.bits,
                ts_ms: batch.ts_ms,
                bytes: batch.bytes,
                texts: batch.texts,
                element_kinds: batch.element_kinds,
                element_bits: batch.element_bits,
            }
        }

        /// The generated record of a batch, its columns moved in.
        #[allow(dead_code)]
        fn columns_into_batch(columns: $crate::columns::Columns) -> sluice::dataflow::types::Batch {
            sluice::dataflow::types::Batch {
                tags: columns.tags,
                qualities: columns.qualities,
                kinds: columns.kinds,
                bits: columns.bits,
                ts_ms: columns.ts_ms,
                bytes: columns.bytes,
                texts: columns.texts,
                element_kinds: columns.element_kinds,
                element_bits: columns.element_bits,
            }
        }

        /// A stage's settings as the stages read them.
        #[allow(dead_code)]
        fn stage_settings(
            settings: &[sluice::dataflow::types::Setting],
        ) -> alloc::vec::Vec<(&str, $crate::settings::SettingValue<'_>)> {
            settings
                .iter()
                .map(|s| (s.key.as_str(), setting_value(s)))
                .collect()
        }

        /// A stage's issues as the WIT carries them.
        #[allow(dead_code)]
        fn config_errors(
            issues: alloc::vec::Vec<$crate::stages::Issue>,
        ) -> alloc::vec::Vec<sluice::dataflow::types::ConfigError> {
            issues
                .into_iter()
                .map(|issue| config_error(issue.tag, &issue.key, issue.message))
                .collect()
        }

        /// What a stage knows of `tag`.
        #[allow(dead_code)]
        fn stage_tag(tag: &sluice::dataflow::types::TagSpec) -> $crate::stages::Tag<'_> {
            $crate::stages::Tag {
                data_type: tag_data_type(tag),
                array_len: tag_array_len(tag),
                byte_order: tag_byte_order(tag),
                factor: tag.factor,
                offset: tag.offset,
                deadband: tag.deadband,
                settings: stage_settings(&tag.settings),
            }
        }

        /// Runs `stage` over a batch; columns that disagree pass untouched (the
        /// engine sends aligned ones).
        #[allow(dead_code)]
        fn process_batch(
            stage: &impl $crate::stages::Stage,
            input: sluice::dataflow::types::Batch,
        ) -> sluice::dataflow::types::Batch {
            let mut columns = columns_from_batch(input);
            if columns.is_aligned() {
                stage.process(&mut columns);
            }
            columns_into_batch(columns)
        }

        #[allow(dead_code)]
        fn config_error(
            tag: Option<u32>,
            key: &str,
            message: alloc::string::String,
        ) -> sluice::dataflow::types::ConfigError {
            sluice::dataflow::types::ConfigError {
                tag,
                key: key.into(),
                message,
            }
        }
    };
}
