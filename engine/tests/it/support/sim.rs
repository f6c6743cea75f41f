//! The built-in Modbus simulator as a device, in the test process.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use sluice::sim::{SimConfig, SimHandle, Simulator};

/// A simulator with `registers` addresses per table, answering after `delay`,
/// serving on a free loopback port.
pub async fn simulator(registers: u16, delay: Duration) -> (Simulator, SimHandle) {
    simulator_on(0, registers, delay).await
}

/// [`simulator`] on the loopback `port` (0: a free one).
pub async fn simulator_on(port: u16, registers: u16, delay: Duration) -> (Simulator, SimHandle) {
    let sim = Simulator::new(SimConfig {
        registers,
        response_delay: delay,
        ..SimConfig::default()
    });
    let handle = sim
        .serve(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .await
        .expect("simulator serves");
    (sim, handle)
}
