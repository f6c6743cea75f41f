//! The demo device: a layout (see the table in the [module doc](super)) and an
//! animation that keeps its values moving.
//!
//! The values are a pure function of a step counter and the animation period,
//! with noise made of sines and cosines of the step: a run is reproducible.

use std::time::Duration;

use super::simulator::Simulator;

/// How long the running flag stays in each state.
const RUN_PHASE: Duration = Duration::from_secs(10);
/// First value of the counter: close to a word boundary, so that a wrong word
/// order shows quickly.
const COUNTER_START: u32 = 65_500;
/// Shortest animation period, to keep a zero period from spinning.
const MIN_PERIOD: Duration = Duration::from_millis(1);

/// The demo device's values at one step.
#[derive(Debug, Clone, Copy, PartialEq)]
struct DemoValues {
    temperature: f32,
    pressure: i16,
    counter: u32,
    running: bool,
    flow: u16,
}

impl DemoValues {
    fn at(step: u64, period: Duration) -> Self {
        // Precision loss on huge step counts only coarsens the noise.
        let x = step as f64;
        let temperature = 21.5 + 0.6 * (x * 0.05).sin() + 0.15 * (x * 0.73).cos();
        let pressure = 1013.0 + 4.0 * (x * 0.021).sin() + 1.5 * (x * 0.57).cos();
        let elapsed = period.saturating_mul(u32::try_from(step).unwrap_or(u32::MAX));
        let running = (elapsed.as_millis() / RUN_PHASE.as_millis()).is_multiple_of(2);
        let flow = if running {
            1250.0 + 35.0 * (x * 0.11).sin() + 10.0 * (x * 0.9).cos()
        } else {
            0.0
        };
        Self {
            temperature: temperature as f32,
            // Both stay well inside their types' ranges.
            pressure: pressure.round() as i16,
            counter: COUNTER_START.wrapping_add(step as u32),
            running,
            flow: flow.round() as u16,
        }
    }

    fn store(&self, sim: &Simulator) {
        let [t_high, t_low] = split(self.temperature.to_bits());
        let [c_high, c_low] = split(self.counter);
        sim.set_holding(0, &[t_high, t_low, self.pressure as u16, c_high, c_low]);
        sim.set_coil(0, self.running);
        sim.set_input(0, &[self.flow]);
    }
}

/// A 32-bit value as two registers, high word first (ABCD).
fn split(value: u32) -> [u16; 2] {
    [(value >> 16) as u16, value as u16]
}

/// The setpoint's first value, tenths of °C: writes change it, the
/// animation never does.
const SETPOINT: u16 = 225;

/// Lays out the demo device (the values of its first step) in `sim`.
///
/// The layout is in the [module doc](super). The tables need at least 6
/// registers; in smaller ones the values that do not fit are dropped.
pub fn demo_device(sim: &Simulator) {
    DemoValues::at(0, MIN_PERIOD).store(sim);
    sim.set_holding(5, &[SETPOINT]);
}

/// Moves the demo device's values one step every `period` (at least 1 ms),
/// forever: spawn it and abort or drop the task to stop it.
///
/// The running flag toggles every 10 s of animation; the counter grows by one
/// per step.
pub async fn animate(sim: Simulator, period: Duration) {
    let period = period.max(MIN_PERIOD);
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut step: u64 = 0;
    loop {
        ticks.tick().await;
        DemoValues::at(step, period).store(&sim);
        step = step.wrapping_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimConfig;

    #[test]
    fn values_stay_in_their_bands() {
        let period = Duration::from_millis(100);
        for step in 0..5_000 {
            let v = DemoValues::at(step, period);
            assert!((20.7..=22.3).contains(&v.temperature), "{v:?}");
            assert!((1007..=1019).contains(&v.pressure), "{v:?}");
            assert!(v.flow == 0 || (1200..=1300).contains(&v.flow), "{v:?}");
            assert_eq!(v.running, (step / 100).is_multiple_of(2));
            assert_eq!(v.flow == 0, !v.running);
        }
        assert_eq!(DemoValues::at(7, period), DemoValues::at(7, period));
    }

    /// The demo's alarm (above 22.0, cleared at 21.8) trips within the first
    /// half minute at its animation period, and clears within the minute.
    #[test]
    fn the_temperature_crosses_the_demo_alarm_within_a_minute() {
        let period = Duration::from_millis(500);
        let warm = (0..60)
            .find(|step| DemoValues::at(*step, period).temperature > 22.0)
            .expect("warm within 30 s");
        let cool = (warm..warm + 120)
            .find(|step| DemoValues::at(*step, period).temperature <= 21.8)
            .expect("cool again");
        assert!(cool - warm < 120, "{warm} {cool}");
    }

    #[test]
    fn layout_is_big_endian_words() {
        let sim = Simulator::new(SimConfig {
            registers: 8,
            ..SimConfig::default()
        });
        demo_device(&sim);
        let regs = sim.holding(0, 5);
        let temperature = f32::from_bits((u32::from(regs[0]) << 16) | u32::from(regs[1]));
        assert!((temperature - 21.65).abs() < 0.01, "{temperature}");
        assert_eq!(regs[2] as i16, 1015);
        assert_eq!(
            (u32::from(regs[3]) << 16) | u32::from(regs[4]),
            COUNTER_START
        );
        assert!(sim.coil(0));
        assert_eq!(sim.holding(5, 1), [SETPOINT]);
    }

    #[tokio::test]
    async fn animation_moves_the_counter() {
        let sim = Simulator::new(SimConfig::default());
        let task = tokio::spawn(animate(sim.clone(), Duration::from_millis(5)));
        tokio::time::sleep(Duration::from_millis(60)).await;
        let regs = sim.holding(3, 2);
        let counter = (u32::from(regs[0]) << 16) | u32::from(regs[1]);
        assert!(counter > COUNTER_START + 3, "{counter}");
        task.abort();
    }
}
