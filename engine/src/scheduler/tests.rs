//! Scheduler behaviour under a paused clock: every time below is virtual.

use std::sync::Mutex as StdMutex;

use super::*;

/// Rounds that take a fixed time per device and record when they started.
struct FakeRounds {
    start: Instant,
    durations: Vec<Duration>,
    log: StdMutex<Vec<(u64, Vec<u32>, u64)>>,
}

impl FakeRounds {
    fn new(durations: Vec<Duration>) -> Arc<Self> {
        Arc::new(Self {
            start: Instant::now(),
            durations,
            log: StdMutex::default(),
        })
    }

    /// Start times (ms since the test began) of device `device`'s rounds.
    fn starts(&self, device: u64) -> Vec<u64> {
        let log = self.log.lock().expect("log");
        log.iter()
            .filter(|(d, _, _)| *d == device)
            .map(|(_, _, at)| *at)
            .collect()
    }
}

impl Rounds for FakeRounds {
    fn run(&self, device: u64, tags: Arc<[u32]>) -> RoundFuture {
        let at = (Instant::now() - self.start).as_millis() as u64;
        self.log
            .lock()
            .expect("log")
            .push((device, tags.to_vec(), at));
        let duration = self.durations[device as usize];
        Box::pin(async move {
            tokio::time::sleep(duration).await;
            RoundOutcome::Done
        })
    }
}

/// Schedules for devices 0, 1, ... with these tag periods, and their counters.
fn schedules(devices: &[&[u64]]) -> (Vec<DeviceSchedule>, Vec<Arc<RoundCounters>>) {
    let schedules: Vec<DeviceSchedule> = devices
        .iter()
        .enumerate()
        .map(|(device, periods)| DeviceSchedule {
            device: device as u64,
            tag_periods: periods.to_vec(),
            counters: Arc::default(),
        })
        .collect();
    let counters = schedules.iter().map(|s| Arc::clone(&s.counters)).collect();
    (schedules, counters)
}

/// Runs the scheduler for `span` of virtual time.
async fn run_for(scheduler: Scheduler, rounds: Arc<FakeRounds>, span: Duration) {
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(scheduler.run(rounds, stopped));
    tokio::time::sleep(span).await;
    stop.send(true).expect("scheduler alive");
    task.await.expect("scheduler ends");
}

#[tokio::test(start_paused = true)]
async fn first_rounds_are_spread_over_one_period() {
    let rounds = FakeRounds::new(vec![Duration::ZERO; 4]);
    let scheduler = Scheduler::new(schedules(&[&[1000u64][..]; 4]).0, Duration::from_secs(5));
    run_for(scheduler, Arc::clone(&rounds), Duration::from_millis(900)).await;
    let firsts: Vec<u64> = (0..4).map(|d| rounds.starts(d)[0]).collect();
    // A quarter period apart, each on the nearest point of the 20 ms grid.
    assert_eq!(firsts, [0, 260, 500, 760]);
}

#[tokio::test(start_paused = true)]
async fn the_next_round_is_due_one_period_after_completion() {
    let rounds = FakeRounds::new(vec![Duration::from_millis(300)]);
    let (schedules, counters) = schedules(&[&[1000]]);
    let scheduler = Scheduler::new(schedules, Duration::from_secs(5));
    run_for(scheduler, Arc::clone(&rounds), Duration::from_millis(4000)).await;
    assert_eq!(rounds.starts(0), [0, 1300, 2600, 3900]);
    let stats = counters[0].snapshot();
    assert_eq!((stats.total, stats.skipped, stats.failed), (4, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_round_that_finds_its_device_busy_is_skipped_and_counted() {
    // Tags 0 and 1 poll every 100 ms, tag 2 every 1000 ms; each round takes 200 ms.
    let rounds = FakeRounds::new(vec![Duration::from_millis(200)]);
    let (schedules, counters) = schedules(&[&[100, 100, 1000]]);
    let scheduler = Scheduler::new(schedules, Duration::from_secs(5));
    run_for(scheduler, Arc::clone(&rounds), Duration::from_millis(2000)).await;
    let stats = counters[0].snapshot();
    assert!(stats.skipped > 0, "{stats:?}");
    let log = rounds.log.lock().expect("log");
    assert!(log.iter().any(|(_, tags, _)| tags == &[0, 1]), "{log:?}");
    assert!(log.iter().any(|(_, tags, _)| tags == &[2]), "{log:?}");
    // Never two rounds of one device at once: starts are at least one round apart.
    let starts: Vec<u64> = log.iter().map(|(_, _, at)| *at).collect();
    assert!(starts.windows(2).all(|w| w[1] >= w[0] + 200), "{starts:?}");
}

#[tokio::test(start_paused = true)]
async fn jobs_of_one_device_due_at_once_run_in_turn() {
    // Tag 0 every 500 ms, tag 1 every 1000 ms: both jobs come due on the same
    // grid points; a round takes 10 ms, well within the wait for a busy device.
    let rounds = FakeRounds::new(vec![Duration::from_millis(10)]);
    let (schedules, counters) = schedules(&[&[500, 1000]]);
    let scheduler = Scheduler::new(schedules, Duration::from_secs(5));
    run_for(scheduler, Arc::clone(&rounds), Duration::from_millis(3050)).await;
    let log = rounds.log.lock().expect("log");
    let runs = |tag: u32| log.iter().filter(|(_, tags, _)| tags == &[tag]).count();
    assert!(runs(0) >= 5, "{log:?}");
    assert!(runs(1) >= 2, "the slower job is not starved: {log:?}");
    assert_eq!(counters[0].snapshot().skipped, 0, "{log:?}");
}

#[test]
fn due_times_fall_on_the_grid_of_their_period() {
    let epoch = Instant::now();
    let ms = Duration::from_millis;
    assert_eq!(on_grid(epoch, epoch + ms(1009), ms(1000)), epoch + ms(1000));
    assert_eq!(on_grid(epoch, epoch + ms(1011), ms(1000)), epoch + ms(1020));
    // A long period keeps the widest step.
    assert_eq!(
        on_grid(epoch, epoch + ms(60_011), ms(60_000)),
        epoch + ms(60_020)
    );
    // A short period gets a finer grid: a twentieth of it.
    assert_eq!(on_grid(epoch, epoch + ms(103), ms(100)), epoch + ms(105));
    assert_eq!(
        on_grid(epoch, epoch + ms(12), ms(10)),
        epoch + Duration::from_micros(12_000)
    );
}

#[tokio::test(start_paused = true)]
async fn a_round_over_the_device_timeout_fails_and_the_device_is_polled_again() {
    let rounds = FakeRounds::new(vec![Duration::from_secs(3600)]);
    let (schedules, counters) = schedules(&[&[1000]]);
    let scheduler = Scheduler::new(schedules, Duration::from_millis(500));
    run_for(scheduler, Arc::clone(&rounds), Duration::from_millis(3200)).await;
    assert_eq!(rounds.starts(0), [0, 1500, 3000]);
    // The third times out after the stop, which waits for it.
    assert_eq!(counters[0].snapshot().failed, 3);
}

#[tokio::test(start_paused = true)]
async fn a_slow_device_never_delays_another() {
    let rounds = FakeRounds::new(vec![Duration::from_secs(5), Duration::ZERO]);
    let scheduler = Scheduler::new(schedules(&[&[100], &[100]]).0, Duration::from_secs(10));
    run_for(scheduler, Arc::clone(&rounds), Duration::from_millis(1000)).await;
    assert_eq!(rounds.starts(0).len(), 1);
    let fast = rounds.starts(1);
    assert_eq!(fast.len(), 10, "{fast:?}");
    assert!(fast.windows(2).all(|w| w[1] - w[0] == 100), "{fast:?}");
}

#[tokio::test(start_paused = true)]
async fn write_only_tags_are_never_polled() {
    let rounds = FakeRounds::new(vec![Duration::ZERO, Duration::ZERO]);
    let scheduler = Scheduler::new(schedules(&[&[0, 500], &[0]]).0, Duration::from_secs(1));
    run_for(scheduler, Arc::clone(&rounds), Duration::from_millis(1200)).await;
    let log = rounds.log.lock().expect("log");
    assert!(
        log.iter()
            .all(|(device, tags, _)| *device == 0 && tags == &[1]),
        "{log:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn devices_added_and_removed_while_running_leave_the_others_alone() {
    let rounds = FakeRounds::new(vec![Duration::ZERO; 3]);
    let (schedules, counters) = schedules(&[&[100], &[100], &[200]]);
    let mut schedules = schedules.into_iter();
    let (first, second, third) = (schedules.next(), schedules.next(), schedules.next());
    let scheduler = Scheduler::new(
        first.into_iter().chain(second).collect(),
        Duration::from_secs(1),
    );
    let changer = scheduler.changer();
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(scheduler.run(Arc::clone(&rounds), stopped));
    tokio::time::sleep(Duration::from_millis(420)).await;
    changer.send(ScheduleChange::Remove(1)).expect("running");
    changer
        .send(ScheduleChange::Add(third.expect("schedule")))
        .expect("running");
    tokio::time::sleep(Duration::from_millis(530)).await;
    stop.send(true).expect("scheduler alive");
    task.await.expect("scheduler ends");
    assert_eq!(
        rounds.starts(0),
        [0, 100, 200, 300, 400, 500, 600, 700, 800, 900],
        "device 0 keeps its rhythm"
    );
    assert_eq!(rounds.starts(1), [50, 150, 250, 350], "removed at 420 ms");
    assert_eq!(rounds.starts(2), [420, 620, 820], "added at 420 ms");
    assert_eq!(counters[2].snapshot().total, 3);
}

#[tokio::test(start_paused = true)]
async fn a_replacing_build_waits_for_the_round_of_the_old_one() {
    let rounds = FakeRounds::new(vec![Duration::from_millis(300), Duration::ZERO]);
    let (schedules, counters) = schedules(&[&[100], &[100]]);
    let mut schedules = schedules.into_iter();
    let (old, new) = (schedules.next(), schedules.next());
    let scheduler = Scheduler::new(old.into_iter().collect(), Duration::from_secs(1));
    let changer = scheduler.changer();
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(scheduler.run(Arc::clone(&rounds), stopped));
    tokio::time::sleep(Duration::from_millis(50)).await;
    changer
        .send(ScheduleChange::Replace(0, new.expect("schedule")))
        .expect("running");
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.send(true).expect("scheduler alive");
    task.await.expect("scheduler ends");
    assert_eq!(rounds.starts(0), [0], "the old build is not polled again");
    let new_starts = rounds.starts(1);
    assert_eq!(new_starts.first(), Some(&350), "{new_starts:?}");
    assert_eq!(
        counters[1].snapshot().skipped,
        2,
        "due at 50 and 200, busy for the 50 ms each waited"
    );
}

/// Rounds whose first one, of any device, panics; the others end at once.
#[derive(Default)]
struct FirstRoundPanics {
    calls: std::sync::atomic::AtomicU32,
}

impl Rounds for FirstRoundPanics {
    fn run(&self, _device: u64, _tags: Arc<[u32]>) -> RoundFuture {
        let call = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async move {
            assert!(call > 0, "the first round panics");
            RoundOutcome::Done
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_round_that_panics_fails_and_its_device_is_polled_again() {
    let rounds = Arc::new(FirstRoundPanics::default());
    let (schedules, counters) = schedules(&[&[100]]);
    let scheduler = Scheduler::new(schedules, Duration::from_secs(1));
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(scheduler.run(Arc::clone(&rounds), stopped));
    tokio::time::sleep(Duration::from_millis(450)).await;
    stop.send(true).expect("scheduler alive");
    task.await.expect("scheduler ends");
    let calls = rounds.calls.load(std::sync::atomic::Ordering::SeqCst);
    let stats = counters[0].snapshot();
    assert_eq!(calls, 5, "at 0, 100, 200, 300 and 400 ms");
    assert_eq!((stats.total, stats.failed), (5, 1), "{stats:?}");
}

#[tokio::test(start_paused = true)]
async fn a_stop_returns_once_the_rounds_in_flight_have_ended() {
    // The round starts at 0 and takes 300 ms; the stop comes at 100 ms.
    let rounds = FakeRounds::new(vec![Duration::from_millis(300)]);
    let scheduler = Scheduler::new(schedules(&[&[1000]]).0, Duration::from_secs(5));
    let began = Instant::now();
    run_for(scheduler, Arc::clone(&rounds), Duration::from_millis(100)).await;
    assert_eq!(rounds.starts(0), [0]);
    assert!(
        began.elapsed() >= Duration::from_millis(300),
        "returned {:?} after the start, before the round ended",
        began.elapsed()
    );
}
