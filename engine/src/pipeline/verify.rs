//! Running a pipeline file's test cases (`sluice test`) against the components.

use std::sync::Arc;

use super::Pipeline;
use super::cases::{Expected, InputValue, Round, Want};
use super::spec::PipelineSpec;
use crate::model::{Batch, Sample, Span, TagSpec, Value};
use crate::runtime::{Limits, Registry};
use crate::yaml::Diagnostics;

fn batch_of(round: &Round) -> Batch {
    let mut batch = Batch::default();
    for given in &round.input {
        let value = match &given.value {
            InputValue::Value(value) => value.clone(),
            InputValue::Raw(bytes) => {
                let start = batch.bytes.len() as u32;
                batch.bytes.extend_from_slice(bytes);
                Value::Raw(Span {
                    start,
                    len: bytes.len() as u32,
                })
            }
        };
        batch.samples.push(Sample {
            tag: given.tag,
            value,
            quality: given.quality,
            ts_ms: 0,
        });
    }
    batch
}

fn same(got: &Value, want: &Value) -> bool {
    let number = |v: &Value| match *v {
        Value::Int(i) => Some(i as f64),
        Value::Uint(u) => Some(u as f64),
        Value::Float(x) => Some(x),
        _ => None,
    };
    match (number(got), number(want), got, want) {
        (Some(a), Some(b), ..) => (a - b).abs() <= 1e-9 * b.abs().max(1.0),
        (.., Value::Array(got), Value::Array(want)) => {
            got.len() == want.len() && got.iter().zip(want).all(|(g, w)| same(g, w))
        }
        _ => got == want,
    }
}

fn show(sample: Option<&Sample>, output: &Batch) -> String {
    match sample {
        None => "no sample (dropped)".to_owned(),
        Some(Sample {
            value: Value::Raw(span),
            quality,
            ..
        }) => format!(
            "raw {:02X?} {quality:?}",
            output.raw(*span).unwrap_or_default()
        ),
        Some(s) => format!("{:?} {:?}", s.value, s.quality),
    }
}

/// Checks `output` against `expected` (samples of `tags`); each miss is a
/// diagnostic at its expectation, `label` (the case and round) first.
pub(crate) fn check_expected(
    expected: &[Expected],
    output: &Batch,
    tags: &[TagSpec],
    label: &str,
    errors: &mut Diagnostics,
) {
    for expected in expected {
        let got = output.samples.iter().find(|s| s.tag == expected.tag);
        let fine = match (&expected.sample, got) {
            (None, None) => true,
            (Some((want, quality)), Some(sample)) => {
                sample.quality == *quality
                    && match (want, &sample.value) {
                        (Want::Value(value), got) => same(got, value),
                        (Want::Raw(bytes), Value::Raw(span)) => {
                            output.raw(*span) == Some(bytes.as_slice())
                        }
                        (Want::Raw(_), _) => false,
                    }
            }
            _ => false,
        };
        if !fine {
            let tag = &tags[expected.tag as usize].key;
            let want = match &expected.sample {
                None => "no sample (dropped)".to_owned(),
                Some((Want::Value(value), quality)) => format!("{value:?} {quality:?}"),
                Some((Want::Raw(bytes), quality)) => format!("raw {bytes:02X?} {quality:?}"),
            };
            errors.push(
                expected.pos,
                format!(
                    "{label}: tag `{tag}`: expected {want}, got {}",
                    show(got, output)
                ),
            );
        }
    }
}

/// Runs every case of `spec` against the registry's components; each failure is
/// a diagnostic at the expectation it concerns.
///
/// # Errors
/// The pipeline does not build, or a case failed.
pub fn run(spec: &PipelineSpec, registry: &Registry) -> Result<usize, Diagnostics> {
    let pipeline = Pipeline::build(spec, registry, Limits::default())?;
    let mut errors = Diagnostics::new(&spec.file);
    for case in &spec.tests {
        let stages = match pipeline.for_device(&Arc::from(case.tags.as_slice())) {
            Ok(stages) => stages,
            Err(failure) => {
                errors.push(case.pos, format!("test `{}`: {failure}", case.name));
                continue;
            }
        };
        for (number, round) in case.rounds.iter().enumerate() {
            let output = match stages.run(batch_of(round)) {
                Ok(output) => output,
                Err(failure) => {
                    errors.push(
                        case.pos,
                        format!("test `{}` round {}: {failure}", case.name, number + 1),
                    );
                    break;
                }
            };
            let label = format!("test `{}` round {}", case.name, number + 1);
            check_expected(&round.expect, &output, &case.tags, &label, &mut errors);
        }
    }
    errors.into_result(spec.tests.len())
}
