//! A PLC speaking the MC protocol's A-compatible 1E frame (binary), written for
//! the tests: no independent 1E peer runs here (virtual-plc speaks 3E and 4E).
//! It serves batch reads and writes of D (words) and M (bits) from memory,
//! answering other devices and numbers past 8191 with completion code 0x56.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

const D: u16 = 0x4420;
const M: u16 = 0x4D20;
/// Device numbers this PLC has.
const POINTS: u32 = 8192;

/// Word and bit memory by (1E device code, device number).
pub type Memory = Arc<Mutex<HashMap<(u16, u32), u16>>>;

/// The PLC, serving until dropped.
pub struct Plc1E {
    port: u16,
    memory: Memory,
    task: JoinHandle<()>,
}

impl Plc1E {
    /// A PLC on a free loopback port whose D and M hold `words` and `bits`.
    pub async fn start(words: &[(u32, u16)], bits: &[(u32, bool)]) -> Self {
        let memory: Memory = Arc::default();
        {
            let mut cells = memory.lock().expect("memory");
            cells.extend(words.iter().map(|&(n, v)| ((D, n), v)));
            cells.extend(bits.iter().map(|&(n, b)| ((M, n), u16::from(b))));
        }
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let shared = Arc::clone(&memory);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, Arc::clone(&shared)));
            }
        });
        Self { port, memory, task }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The word at D`number`.
    pub fn word(&self, number: u32) -> u16 {
        let cells = self.memory.lock().expect("memory");
        cells.get(&(D, number)).copied().unwrap_or(0)
    }
}

impl Drop for Plc1E {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Answers requests until the client goes away or sends what 1E has not.
async fn serve(mut stream: TcpStream, memory: Memory) {
    let mut head = [0u8; 12];
    while stream.read_exact(&mut head).await.is_ok() {
        let command = head[0];
        if command > 3 || head[1] != 0xFF || head[11] != 0 {
            return;
        }
        let number = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        let code = u16::from_le_bytes([head[8], head[9]]);
        let points = if head[10] == 0 {
            256
        } else {
            u32::from(head[10])
        };
        let bits = command & 1 == 0;
        let write = command >= 2;
        let mut data = vec![0u8; if bits { points.div_ceil(2) } else { points * 2 } as usize];
        if write && stream.read_exact(&mut data).await.is_err() {
            return;
        }
        let known = (code == D && !bits) || (code == M && bits);
        let answer = if !known || number + points > POINTS {
            vec![command | 0x80, 0x56]
        } else {
            let mut cells = memory.lock().expect("memory");
            let mut answer = vec![command | 0x80, 0x00];
            for i in 0..points {
                let cell = cells.entry((code, number + i)).or_insert(0);
                let at = i as usize;
                match (write, bits) {
                    (true, true) => *cell = u16::from(data[at / 2] >> (4 * (1 - at % 2)) & 1),
                    (true, false) => *cell = u16::from_le_bytes([data[2 * at], data[2 * at + 1]]),
                    (false, true) => data[at / 2] |= (*cell as u8 & 1) << (4 * (1 - at % 2)),
                    (false, false) => data[2 * at..2 * at + 2].copy_from_slice(&cell.to_le_bytes()),
                }
            }
            if !write {
                answer.extend_from_slice(&data);
            }
            answer
        };
        if stream.write_all(&answer).await.is_err() {
            return;
        }
    }
}
