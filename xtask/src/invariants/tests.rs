use super::prefixes::prefix;
use super::*;

const TEST_PREFIXES: &[Prefix] = &[
    prefix("AAA", "a.md"),
    Prefix {
        plain: false,
        series: "SW",
        ..prefix("BBB", "b.md")
    },
];

fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(p, t)| ((*p).to_owned(), (*t).to_owned()))
        .collect()
}

fn problems(list: &[(&str, &str)]) -> Vec<String> {
    analyse(TEST_PREFIXES, &files(list))
        .1
        .iter()
        .map(ToString::to_string)
        .collect()
}

const NOTE_A: &str = "# A\n\n- **AAA-1. One.** See BBB-S1.\n- **AAA-2: two.**\n";
const NOTE_B: &str = "# B\n\n- **BBB-S1. One.**\n\nText citing AAA-2.\n";

#[test]
fn a_consistent_tree_passes_and_is_counted() {
    let (summary, problems) = analyse(
        TEST_PREFIXES,
        &files(&[
            ("docs/a.md", NOTE_A),
            ("docs/b.md", NOTE_B),
            ("README.md", "AAA-1 and XYZ-9 (not a prefix)"),
            (
                "src/x.rs",
                "// keeps AAA-1 and AAA-2\nfn f() {} // BBB-S1\n",
            ),
        ]),
    );
    assert_eq!(problems, []);
    assert_eq!(
        summary,
        Summary {
            defined: 3,
            notes: 2,
            citations: 6,
            in_code: 3
        }
    );
}

#[test]
fn every_problem_is_reported_where_it_is() {
    assert_eq!(
        problems(&[
            (
                "docs/a.md",
                "- **AAA-1. One.**\n- **AAA-1: again.**\n- **BBB-S2. Not here.**\n\
                 - **CCC-1. Unknown.**\n- **L3. Old.**\n- **AAA-S1. No series.**\n"
            ),
            ("docs/b.md", "- **BBB-1. Plain.**\n- **BBB-W1. Fine.**\n"),
            (
                "src/x.rs",
                "// AAA-1, AAA-S1, BBB-S2, BBB-1 and AAA-7\n// old: (L5)\n"
            ),
        ]),
        [
            "docs/a.md:2: AAA-1 is defined twice: here and at docs/a.md:1",
            "docs/a.md:3: BBB-S2 is defined in docs/a.md, but BBB- IDs belong to docs/b.md",
            "docs/a.md:4: CCC-1 has an unknown prefix (known: AAA, BBB)",
            "docs/a.md:5: L3 is defined without its note's prefix: name it PREFIX-N \
             (docs/architecture.md)",
            "docs/a.md:6: AAA-S1 is not an ID of docs/a.md: AAA-N",
            "docs/b.md:1: BBB-1 is not an ID of docs/b.md: BBB-SN or BBB-WN",
            "docs/b.md:2: BBB-W1 is defined in docs/b.md but cited by no code (no .rs file)",
            "src/x.rs:1: AAA-7 is cited but defined nowhere",
            "src/x.rs:2: old-style citation `L5`: cite the invariant by its ID, PREFIX-N \
             (docs/architecture.md)",
        ]
    );
}

#[test]
fn duplicates_across_notes_name_both_places() {
    assert_eq!(
        problems(&[
            ("docs/a.md", "- **AAA-1. One.**\n"),
            ("docs/b.md", "x\n- **AAA-1. One again.**\n"),
            ("src/x.rs", "// AAA-1\n"),
        ]),
        [
            "docs/b.md:2: AAA-1 is defined in docs/b.md, but AAA- IDs belong to docs/a.md",
            "docs/b.md:2: AAA-1 is defined twice: here and at docs/a.md:1",
        ]
    );
}

#[test]
fn only_code_counts_as_a_citation_and_only_notes_define() {
    assert_eq!(
        problems(&[
            ("docs/a.md", "- **AAA-1. One.** Also AAA-1.\n"),
            ("docs/sub/a.md", "- **AAA-2. Not a note.**\n"),
            ("README.md", "AAA-1 and AAA-2\n"),
            ("src/x.txt", "AAA-1\n"),
        ]),
        [
            "README.md:1: AAA-2 is cited but defined nowhere",
            "docs/a.md:1: AAA-1 is defined in docs/a.md but cited by no code (no .rs file)",
            "docs/sub/a.md:1: AAA-2 is cited but defined nowhere",
        ]
    );
}

#[test]
fn the_real_prefixes_are_unique_and_name_their_notes() {
    let names: BTreeSet<&str> = PREFIXES.iter().map(|p| p.name).collect();
    let notes: BTreeSet<&str> = PREFIXES.iter().map(|p| p.note).collect();
    assert_eq!(names.len(), PREFIXES.len());
    assert_eq!(notes.len(), PREFIXES.len());
    assert!(PREFIXES.iter().all(|p| p.plain || !p.series.is_empty()));
}
