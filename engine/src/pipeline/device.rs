//! A pipeline's stages configured for one device, and where their calls run.
//!
//! The engine's own stages run on the thread of the round: they are known to
//! finish well within their budget, and a hand-off per round would cost more
//! than the call. A stage the engine does not ship runs on a sandbox thread
//! (`runtime::threads`, below the engine's CPU priority), so one that loops until
//! its budget holds that thread and its own device's round, not the async thread
//! every other device's round runs on (docs/components.md, "Where component calls
//! run").

use std::sync::Arc;

use super::stage::StageFailure;
use crate::model::{Batch, Setting};
use crate::runtime::{CallError, PoolHealth, Processor, threads};

/// One stage of a device's pipeline.
#[derive(Debug)]
pub(super) struct Step {
    /// The place of its (first) stage in the pipeline.
    pub(super) index: usize,
    pub(super) processor: Processor,
    /// Its calls run on a sandbox thread.
    pub(super) isolated: bool,
}

/// The stages of a pipeline, configured for one device.
#[derive(Debug)]
pub struct DevicePipeline {
    steps: Vec<Step>,
    chained: Option<Arc<[Setting]>>,
}

impl DevicePipeline {
    pub(super) fn new(steps: Vec<Step>, chained: Option<Arc<[Setting]>>) -> Self {
        Self { steps, chained }
    }

    /// The settings of one built-in `chain` call that runs the whole pipeline,
    /// when all its stages are built-in ones `chain` runs.
    pub fn chained(&self) -> Option<&[Setting]> {
        self.chained.as_deref()
    }

    /// Drops every stage's resource in its component (a pipeline that an
    /// [`Ingester`](crate::runtime::Ingester) runs instead); the next call
    /// creates them again, with no memory of the batches before.
    pub fn release(&self) {
        self.steps.iter().for_each(|s| s.processor.release());
    }

    /// How the pools of the stages are doing.
    pub fn health(&self) -> Vec<PoolHealth> {
        self.steps.iter().map(|s| s.processor.health()).collect()
    }

    /// Runs a batch through every stage in order, every call on this thread
    /// (a pipeline's test cases).
    ///
    /// # Errors
    /// The first stage that failed; the batch is lost.
    pub fn run(&self, mut batch: Batch) -> Result<Batch, StageFailure> {
        for step in &self.steps {
            batch = step
                .processor
                .process(batch)
                .map_err(|error| step.failure(error))?;
        }
        Ok(batch)
    }

    /// Runs one round's batch through every stage in order, an isolated stage's
    /// call on a sandbox thread.
    ///
    /// # Errors
    /// The first stage that failed; the batch is lost for this round.
    pub async fn run_in_round(self: &Arc<Self>, mut batch: Batch) -> Result<Batch, StageFailure> {
        for (at, step) in self.steps.iter().enumerate() {
            batch = self
                .call(at, "process", move |p| p.process(batch))
                .await
                .map_err(|error| step.failure(error))?;
        }
        Ok(batch)
    }

    /// Clears the memory every stage keeps between batches (after a reconnect),
    /// an isolated stage's call on a sandbox thread.
    ///
    /// # Errors
    /// The first stage whose reset failed; the others are still reset.
    pub async fn reset_in_round(self: &Arc<Self>) -> Result<(), CallError> {
        let mut first = Ok(());
        for at in 0..self.steps.len() {
            if let Err(error) = self.call(at, "reset", Processor::reset).await
                && first.is_ok()
            {
                first = Err(error);
            }
        }
        first
    }

    /// Runs `call` on step `at`'s processor, where that step's calls run.
    async fn call<T, F>(
        self: &Arc<Self>,
        at: usize,
        function: &'static str,
        call: F,
    ) -> Result<T, CallError>
    where
        T: Send + 'static,
        F: FnOnce(&Processor) -> Result<T, CallError> + Send + 'static,
    {
        let step = &self.steps[at];
        if !step.isolated {
            return call(&step.processor);
        }
        let pipeline = Arc::clone(self);
        threads::call_in_sandbox(
            step.processor.sandbox_permits(),
            step.processor.component(),
            function,
            move || call(&pipeline.steps[at].processor),
        )
        .await
    }
}

impl Step {
    fn failure(&self, error: CallError) -> StageFailure {
        StageFailure {
            index: self.index,
            error,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::model::{DataType, TagSpec};
    use crate::pipeline::{Pipeline, load_str};
    use crate::runtime::{ComponentKind, Limits, Registry, Runtime, RuntimeConfig};

    /// Built-in stages, then an uploaded one that loops for `fuel` units a call.
    fn looping_pipeline(fuel: u64) -> Pipeline {
        let registry =
            Registry::with_builtins(Runtime::new(RuntimeConfig::default()).expect("runtime"))
                .expect("registry");
        let hostile = std::fs::read(Path::new(env!("SLUICE_TEST_COMPONENTS")).join("hostile.wasm"))
            .expect("test component");
        registry
            .install(ComponentKind::Stage, "hostile", "1.0.0", &hostile)
            .expect("installs");
        let yaml = "name: p\nstages:\n  - use: swap_bytes\n  - use: decode\n  - use: hostile\n    settings: {mode: loop}\n";
        let spec = load_str("p.yaml", yaml, "p", Path::new(".")).expect("parses");
        let limits = Limits {
            fuel_per_call: fuel,
            ..Limits::default()
        };
        Pipeline::build(&spec, &registry, limits).expect("builds")
    }

    fn for_device(pipeline: &Pipeline) -> DevicePipeline {
        pipeline
            .for_device(&Arc::from([TagSpec::plain("t", DataType::Uint16)]))
            .expect("device")
    }

    fn looping(fuel: u64) -> DevicePipeline {
        for_device(&looping_pipeline(fuel))
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_looping_uploaded_stage_leaves_the_async_thread_to_the_others() {
        // ~50 ms of looping at this machine's ~10 M fuel units a millisecond.
        let pipeline = Arc::new(looping(500_000_000));
        let isolated: Vec<bool> = pipeline.steps.iter().map(|s| s.isolated).collect();
        assert_eq!(
            isolated,
            [true],
            "the built-ins composed with it go with it to a sandbox thread"
        );
        // Another device's work: it gets the only async thread while the loop runs.
        let ticks = Arc::new(AtomicU32::new(0));
        let ticker = tokio::spawn({
            let ticks = Arc::clone(&ticks);
            async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    ticks.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        let failure = pipeline
            .run_in_round(Batch::default())
            .await
            .expect_err("the budget stops it");
        ticker.abort();
        assert_eq!(failure.index, 2);
        assert!(failure.to_string().contains("CPU budget"), "{failure}");
        let ticked = ticks.load(Ordering::Relaxed);
        assert!(ticked >= 3, "the async thread was held: {ticked} ticks");
    }

    #[test]
    fn run_calls_every_stage_on_the_calling_thread() {
        let failure = looping(2_000_000)
            .run(Batch::default())
            .expect_err("the budget stops it");
        assert_eq!(failure.index, 2);
        assert!(failure.to_string().contains("2000000 fuel"), "{failure}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn calls_of_one_pool_take_one_sandbox_thread_at_a_time() {
        // Six devices on a pool of one instance (the default).
        let pipeline = looping_pipeline(2_000_000);
        let inside = Arc::new(AtomicU32::new(0));
        let most = Arc::new(AtomicU32::new(0));
        let calls: Vec<_> = (0..6)
            .map(|_| {
                let device = Arc::new(for_device(&pipeline));
                let (inside, most) = (Arc::clone(&inside), Arc::clone(&most));
                tokio::spawn(async move {
                    device
                        .call(0, "process", move |_| {
                            let thread = std::thread::current();
                            assert_eq!(thread.name(), Some("sluice-sandbox"));
                            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(5));
                            inside.fetch_sub(1, Ordering::SeqCst);
                            Ok(())
                        })
                        .await
                })
            })
            .collect();
        for call in calls {
            call.await.expect("task").expect("call");
        }
        assert_eq!(
            most.load(Ordering::SeqCst),
            1,
            "calls on sandbox threads at once"
        );
    }
}
