use super::*;

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-seq-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn next(seq: &SeqAllocator, device: &str) -> (u64, Option<(u64, u64)>) {
    let numbered = seq.next(device).expect("a number");
    (numbered.seq, numbered.skipped)
}

/// Opens the allocator on `dir` for `devices`.
fn open(dir: &std::path::Path, devices: &[&str]) -> (Store, SeqAllocator) {
    let store = Store::open(dir).expect("store");
    let seq = SeqAllocator::open(&store, None, devices.iter().copied()).expect("seq");
    (store, seq)
}

#[test]
fn a_crash_skips_numbers_and_announces_them() {
    let dir = scratch("crash");
    let (store, seq) = open(&dir, &["a"]);
    assert_eq!(next(&seq, "a"), (1, None));
    assert_eq!(next(&seq, "a"), (2, None));
    assert_eq!(next(&seq, "b"), (1, None));
    seq.mark().expect("marks");
    assert_eq!(next(&seq, "a"), (3, None));
    // Dropped without `close`: a crash.
    drop((seq, store));
    let (store, seq) = open(&dir, &["a"]);
    // 3 was handed out after the last mark: it is in the announcement, with
    // the numbers above it that were never used.
    assert_eq!(next(&seq, "a"), (BLOCK + 1, Some((3, BLOCK))));
    assert_eq!(next(&seq, "a"), (BLOCK + 2, None));
    assert_eq!(next(&seq, "b"), (BLOCK + 1, Some((2, BLOCK))));
    drop((seq, store));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_clean_stop_goes_on_without_a_gap() {
    let dir = scratch("clean");
    let (store, seq) = open(&dir, &["a", "idle"]);
    for expected in 1..=7 {
        assert_eq!(next(&seq, "a"), (expected, None));
    }
    seq.close().expect("close");
    drop((seq, store));
    let (store, seq) = open(&dir, &["a", "idle"]);
    assert_eq!(next(&seq, "a"), (8, None));
    assert_eq!(next(&seq, "idle"), (1, None));
    // A number asked for after `close` is reserved anew, never given twice.
    seq.close().expect("close");
    assert_eq!(next(&seq, "a"), (9, None));
    drop((seq, store));
    let (store, seq) = open(&dir, &["a"]);
    assert_eq!(next(&seq, "a"), (BLOCK + 9, Some((9, BLOCK + 8))));
    drop((seq, store));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn numbers_not_announced_yet_stay_announced() {
    let dir = scratch("unannounced");
    let (store, seq) = open(&dir, &["a"]);
    assert_eq!(next(&seq, "a"), (1, None));
    seq.mark().expect("marks");
    drop((seq, store));
    // Two crashes in a row before the device reports: the second start
    // announces what both left.
    let (store, seq) = open(&dir, &["a"]);
    seq.mark().expect("marks");
    drop((seq, store));
    let (store, seq) = open(&dir, &["a"]);
    // A clean stop before it reports keeps them too, and gives back its block.
    seq.close().expect("close");
    drop((seq, store));
    let (store, seq) = open(&dir, &["a"]);
    assert_eq!(next(&seq, "a"), (2 * BLOCK + 1, Some((2, 2 * BLOCK))));
    drop((seq, store));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn one_write_tops_up_every_device_low_on_numbers() {
    let dir = scratch("top-up");
    let (store, seq) = open(&dir, &["a", "b"]);
    for _ in 0..BLOCK {
        seq.next("a").expect("a");
        seq.next("b").expect("b");
    }
    assert_eq!(seq.reservations.get(), 1, "the start's write covers both");
    // "a" runs out first; the same write gives "b" its next block.
    assert_eq!(next(&seq, "a"), (BLOCK + 1, None));
    assert_eq!(next(&seq, "b"), (BLOCK + 1, None));
    assert_eq!(seq.reservations.get(), 2);
    // A device the start did not know reserves its first block itself.
    assert_eq!(next(&seq, "c"), (1, None));
    assert_eq!(seq.reservations.get(), 3);
    let read = redb::ReadableDatabase::begin_read(store.db()).expect("read");
    let ceilings = read.open_table(CEILINGS).expect("table");
    let marks = read.open_table(MARKS).expect("table");
    let row = |table: &redb::ReadOnlyTable<&str, u64>, d: &str| {
        table.get(d).expect("get").expect("row").value()
    };
    assert_eq!([row(&ceilings, "a"), row(&ceilings, "b")], [2 * BLOCK; 2]);
    // Every write carries the marks that moved: the last one (c's block)
    // those of the first numbers of a's and b's second blocks.
    assert_eq!([row(&marks, "a"), row(&marks, "b")], [BLOCK + 1; 2]);
    drop((ceilings, marks, read, seq, store));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn numbers_an_earlier_engine_committed_with_its_reports_are_not_given_again() {
    let dir = scratch("migrate");
    let store = Store::open(&dir).expect("store");
    let write = store.db().begin_write().expect("write");
    {
        let mut table = write.open_table(LAST_COMMITTED).expect("table");
        table.insert("a", 41).expect("insert");
    }
    write.commit().expect("commit");
    let seq = SeqAllocator::open(&store, None, []).expect("seq");
    // A file from before marks were kept announces nothing.
    assert_eq!(next(&seq, "a"), (42, None));
    drop(seq);
    let read = redb::ReadableDatabase::begin_read(store.db()).expect("read");
    assert!(
        matches!(
            read.open_table(LAST_COMMITTED),
            Err(redb::TableError::TableDoesNotExist(_))
        ),
        "the old table is moved into the ceilings"
    );
    drop(read);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
