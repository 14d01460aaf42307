//! The standard library: `.berth` sources embedded in the binary and parsed with the real
//! parser as virtual files named `<std>/gpu.berth` and so on.
//!
//! Standard-library files get file ids from [`STD_FILE_BASE`] up, so they never collide with
//! the user's files; diagnostics never point into them (a test checks they analyse clean),
//! and labels that would are dropped.

use crate::source::FileId;
use crate::syntax::{Parsed, parse_file};
use std::sync::OnceLock;

/// File ids of standard-library files start here.
pub const STD_FILE_BASE: u32 = 0xFFFF_0000;

/// One embedded module.
#[derive(Debug)]
pub struct StdFile {
    /// The module path used in `use`: `std.gpu`.
    pub module: &'static str,
    /// The virtual file name: `<std>/gpu.berth`.
    pub name: &'static str,
    pub text: &'static str,
}

/// The modules, in the order their items get their (internal) indices.
pub static FILES: &[StdFile] = &[
    StdFile {
        module: "std.gpu",
        name: "<std>/gpu.berth",
        text: include_str!("../../../stdlib/gpu.berth"),
    },
    StdFile {
        module: "std.services",
        name: "<std>/services.berth",
        text: include_str!("../../../stdlib/services.berth"),
    },
    StdFile {
        module: "std.environments",
        name: "<std>/environments.berth",
        text: include_str!("../../../stdlib/environments.berth"),
    },
];

/// The file id of the `i`-th standard-library file.
pub fn file_id(i: usize) -> FileId {
    FileId(STD_FILE_BASE + i as u32)
}

/// Whether a file id belongs to the standard library.
pub fn is_std(file: FileId) -> bool {
    file.0 >= STD_FILE_BASE
}

/// The embedded file behind a standard-library file id.
pub fn file(id: FileId) -> Option<&'static StdFile> {
    id.0.checked_sub(STD_FILE_BASE)
        .and_then(|i| FILES.get(i as usize))
}

/// Every standard-library file, parsed: an owned copy of [`parsed`] for callers that keep
/// the trees (cloning is much cheaper than parsing).
pub fn parse() -> Vec<Parsed> {
    parsed().to_vec()
}

/// Every standard-library file, parsed once per process: the text is compiled in, so the
/// trees never change, and `berth check`, the language server (on every keystroke) and the
/// tests would otherwise parse it again on every analysis.
pub fn parsed() -> &'static [Parsed] {
    static PARSED: OnceLock<Vec<Parsed>> = OnceLock::new();
    PARSED.get_or_init(|| {
        FILES
            .iter()
            .enumerate()
            .map(|(i, f)| parse_file(file_id(i), f.text))
            .collect()
    })
}
