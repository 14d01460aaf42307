//! Finding and reading `.berth` sources: the only place the command line touches source files
//! before handing text to the compiler (which never does I/O).
//!
//! Paths given on the command line are files (taken whatever their extension) or directories
//! (searched recursively for `*.berth`, skipping hidden entries such as `.git` and symlink
//! loops). The result is sorted by path and deduplicated, so file ids, and therefore every
//! output, do not depend on argument order or directory listing order.
//!
//! Reading refuses, with a message naming the path and a hint, files that are missing,
//! unreadable, larger than [`MAX_FILE_BYTES`] (checked before reading the whole file) or not
//! UTF-8 (with the byte offset and line of the first invalid byte).

pub mod output;

use berth_compiler::driver::MAX_FILE_BYTES;
use berth_compiler::source::{FileId, SourceMap};
use std::collections::BTreeMap;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use thiserror::Error;

pub use output::IoProblem;

/// The extension of berth sources.
pub const SOURCE_EXTENSION: &str = "berth";

/// The largest plan file `verify`, `apply` and the other commands that take a saved plan
/// read (docs/cli.md): above the plan of the largest estate berth is measured on (100,000
/// workloads × 20,000 dense targets: 154 MB; 10,000 × 2,000: 16 MB), and refused before it is
/// read whole.
pub const MAX_PLAN_BYTES: usize = 512 << 20;

/// Reads a saved plan's text: at most [`MAX_PLAN_BYTES`], UTF-8.
pub fn read_plan_file(path: &Path) -> Result<String, LoadError> {
    read_source(path, MAX_PLAN_BYTES)
}

/// Why a source could not be found or read. Every variant names the path.
#[derive(Debug, Error)]
pub enum LoadError {
    #[error("`{}` does not exist", path.display())]
    NotFound { path: PathBuf },
    #[error("`{}` is a symbolic link to `{}`, which does not exist", path.display(), target.display())]
    DanglingLink { path: PathBuf, target: PathBuf },
    #[error("cannot read `{}`: {problem}", path.display())]
    Unreadable { path: PathBuf, problem: IoProblem },
    #[error("cannot search directory `{}`: {problem}", path.display())]
    Walk { path: PathBuf, problem: IoProblem },
    #[error("`{}` is not a file or a directory", path.display())]
    NotAFile { path: PathBuf },
    #[error("`{}` is larger than the {limit_mib} MiB limit", path.display(), limit_mib = limit / (1024 * 1024))]
    TooLarge { path: PathBuf, limit: usize },
    #[error(
        "`{}` is not valid UTF-8: invalid byte at offset {offset} (line {line})",
        path.display()
    )]
    NotUtf8 {
        path: PathBuf,
        /// Byte offset of the first byte that is not part of valid UTF-8.
        offset: usize,
        /// 1-based line of that byte.
        line: usize,
    },
    #[error("no `.{SOURCE_EXTENSION}` files found in {}", list_paths(paths))]
    NoSources { paths: Vec<PathBuf> },
}

impl LoadError {
    /// One sentence on what to do about it.
    pub fn hint(&self) -> &'static str {
        match self {
            LoadError::NotFound { .. } => {
                "check the path; berth takes `.berth` files and directories that contain them"
            }
            LoadError::DanglingLink { .. } => {
                "fix or remove the link, or pass the file it should name"
            }
            LoadError::Unreadable { problem, .. } | LoadError::Walk { problem, .. } => {
                problem.hint()
            }
            LoadError::NotAFile { .. } => "pass `.berth` files or directories that contain them",
            LoadError::TooLarge { .. } => {
                "split the specification into several files in one directory and pass the directory"
            }
            LoadError::NotUtf8 { .. } => {
                "berth sources are UTF-8; convert the file, for example with `iconv -t UTF-8`"
            }
            LoadError::NoSources { .. } => {
                "berth looks for files ending in `.berth`; hidden directories are skipped"
            }
        }
    }
}

fn list_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| format!("`{}`", p.display()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads one source file's text. The command line uses [`FsReader`]; tests may substitute
/// an in-memory reader.
pub trait SourceReader {
    fn read(&self, path: &Path) -> Result<String, LoadError>;
}

/// Reads from the file system, enforcing the size limit and UTF-8.
#[derive(Clone, Copy, Debug, Default)]
pub struct FsReader;

impl SourceReader for FsReader {
    fn read(&self, path: &Path) -> Result<String, LoadError> {
        read_source(path, MAX_FILE_BYTES)
    }
}

/// Reads `path` as UTF-8 text of at most `limit` bytes. Never reads more than `limit + 1`
/// bytes, even if the file grows or is not a regular file.
pub fn read_source(path: &Path, limit: usize) -> Result<String, LoadError> {
    let file = std::fs::File::open(path).map_err(|e| io_error(path, e))?;
    let declared = file.metadata().map_err(|e| io_error(path, e))?.len();
    let too_large = || LoadError::TooLarge {
        path: path.to_path_buf(),
        limit,
    };
    if declared > limit as u64 {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(declared as usize);
    file.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(path, e))?;
    if bytes.len() > limit {
        return Err(too_large());
    }
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let line = 1 + e.as_bytes()[..offset]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        LoadError::NotUtf8 {
            path: path.to_path_buf(),
            offset,
            line,
        }
    })
}

fn io_error(path: &Path, source: io::Error) -> LoadError {
    match source.kind() {
        io::ErrorKind::NotFound => match fs_link_target(path) {
            Some(target) => LoadError::DanglingLink {
                path: path.to_path_buf(),
                target,
            },
            None => LoadError::NotFound {
                path: path.to_path_buf(),
            },
        },
        io::ErrorKind::IsADirectory => LoadError::NotAFile {
            path: path.to_path_buf(),
        },
        _ => LoadError::Unreadable {
            path: path.to_path_buf(),
            problem: IoProblem::of(source),
        },
    }
}

/// Where `path` points, if it is a symlink.
fn fs_link_target(path: &Path) -> Option<PathBuf> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    meta.file_type()
        .is_symlink()
        .then(|| std::fs::read_link(path).ok())
        .flatten()
}

/// Expands command-line paths into the sorted, deduplicated list of source files.
/// Collects every problem rather than stopping at the first.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Vec<LoadError>> {
    let mut found = Vec::new();
    let mut errors = Vec::new();
    for path in paths {
        match std::fs::metadata(path) {
            Err(e) => errors.push(io_error(path, e)),
            Ok(meta) if meta.is_dir() => walk_dir(path, &mut found, &mut errors),
            Ok(meta) if meta.is_file() => found.push(path.clone()),
            Ok(_) => errors.push(LoadError::NotAFile { path: path.clone() }),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    found.sort();
    dedup_same_files(&mut found);
    // INVARIANT: what-if files come last, so a spec's files have the same ids in the loaded
    // sources and in `relative_sources`, which leaves what-if files out.
    found.sort_by_key(|p| is_what_if(p));
    if found.is_empty() {
        return Err(vec![LoadError::NoSources {
            paths: paths.to_vec(),
        }]);
    }
    Ok(found)
}

/// Keeps the first (in sorted order) of several paths naming one file (`a.berth`,
/// `./a.berth`, a symlink to it): a file checked twice would report everything twice.
fn dedup_same_files(paths: &mut Vec<PathBuf>) {
    let mut seen = std::collections::BTreeSet::new();
    paths.retain(|p| seen.insert(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())));
}

fn walk_dir(root: &Path, found: &mut Vec<PathBuf>, errors: &mut Vec<LoadError>) {
    let walker = walkdir::WalkDir::new(root)
        .follow_links(true)
        .sort_by_file_name()
        .into_iter()
        // The root itself may be hidden (`.`, `..`, `.config/berth`): the user asked for it.
        .filter_entry(|e| e.depth() == 0 || !is_hidden(e.file_name()));
    for entry in walker {
        match entry {
            Ok(e) if e.file_type().is_file() && has_source_extension(e.path()) => {
                found.push(e.into_path());
            }
            Ok(_) => {}
            // A symlink back to an ancestor: everything below it is already being walked.
            Err(e) if e.loop_ancestor().is_some() => {}
            Err(e) if is_irrelevant_dangling_link(&e) => {}
            Err(e) => {
                let path = e.path().unwrap_or(root).to_path_buf();
                let is_dir = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
                let source = e
                    .into_io_error()
                    .unwrap_or_else(|| io::Error::other("directory walk failed"));
                errors.push(if is_dir {
                    LoadError::Walk {
                        path,
                        problem: IoProblem::of(source),
                    }
                } else {
                    // A file below the directory (a broken `x.berth` link, an unreadable
                    // entry): name what is wrong with it, not the directory.
                    io_error(&path, source)
                });
            }
        }
    }
}

/// A broken symlink that would not be a source anyway (an editor lock file, a stale link in
/// a build folder) is no reason to fail; a broken `x.berth` link is.
fn is_irrelevant_dangling_link(e: &walkdir::Error) -> bool {
    let Some(path) = e.path() else { return false };
    let is_symlink = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    is_symlink && !has_source_extension(path)
}

fn is_hidden(name: &std::ffi::OsStr) -> bool {
    name.to_str().is_some_and(|n| n.starts_with('.'))
}

pub fn has_source_extension(path: &Path) -> bool {
    path.extension().is_some_and(|ext| ext == SOURCE_EXTENSION)
}

/// How a what-if file's name ends: `NAME.what-if.berth` in a spec directory is not part of the
/// spec but a change of it (`berth plan --what-if`; `berth check` and the editor check it
/// against the spec of its directory).
pub const WHAT_IF_SUFFIX: &str = ".what-if.berth";

pub fn is_what_if(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(WHAT_IF_SUFFIX))
}

/// The sources of one run: `paths[i]` is the file with id `i` in `sources`.
#[derive(Debug, Default)]
pub struct Loaded {
    pub sources: SourceMap,
    pub paths: Vec<PathBuf>,
}

impl Loaded {
    /// The files grouped into specs: one spec per directory (its files share one namespace),
    /// directories in path order, each spec's files in path order.
    /// What-if files are not part of any spec ([`Loaded::what_ifs`]).
    pub fn specs(&self) -> Vec<Vec<FileId>> {
        self.by_dir().into_values().collect()
    }

    /// Each what-if file, with the files of the spec of its directory (none when no spec file
    /// of that directory was loaded).
    pub fn what_ifs(&self) -> Vec<(FileId, Vec<FileId>)> {
        let by_dir = self.by_dir();
        self.sources
            .files()
            .iter()
            .zip(&self.paths)
            .filter(|(_, path)| is_what_if(path))
            .map(|(file, path)| {
                let dir = path.parent().unwrap_or(Path::new(""));
                (file.id, by_dir.get(dir).cloned().unwrap_or_default())
            })
            .collect()
    }

    fn by_dir(&self) -> BTreeMap<&Path, Vec<FileId>> {
        let mut by_dir: BTreeMap<&Path, Vec<FileId>> = BTreeMap::new();
        for (file, path) in self.sources.files().iter().zip(&self.paths) {
            if is_what_if(path) {
                continue;
            }
            let dir = path.parent().unwrap_or(Path::new(""));
            by_dir.entry(dir).or_default().push(file.id);
        }
        by_dir
    }
}

/// Discovers and reads every source under `paths`. Reports every problem, not just the first.
pub fn load(paths: &[PathBuf], reader: &dyn SourceReader) -> Result<Loaded, Vec<LoadError>> {
    let files = discover(paths)?;
    let mut loaded = Loaded::default();
    let mut errors = Vec::new();
    for path in files {
        match reader.read(&path) {
            Ok(text) => {
                loaded.sources.add(path.display().to_string(), text);
                loaded.paths.push(path);
            }
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(loaded)
    } else {
        Err(errors)
    }
}

/// The loaded files of the spec at `root`, named relative to it: what is planned and
/// digested, so a plan's source digest does not depend on where `berth` runs.
pub fn relative_sources(root: &Path, loaded: &Loaded) -> SourceMap {
    let mut sources = SourceMap::new();
    for (file, file_path) in loaded.sources.files().iter().zip(&loaded.paths) {
        if !is_what_if(file_path) {
            sources.add(spec_relative_name(root, file_path), file.text.clone());
        }
    }
    sources
}

/// `workloads.berth` for `DIR/workloads.berth`, `sub/x.berth` below it, the file name when
/// the spec is one file; `/` separators on every platform.
fn spec_relative_name(root: &Path, file: &Path) -> String {
    let relative = match file.strip_prefix(root) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel,
        _ => file.file_name().map_or(file, Path::new),
    };
    relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write(dir: &Path, rel: &str, bytes: &[u8]) -> PathBuf {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("create dirs");
        }
        fs::write(&path, bytes).expect("write file");
        path
    }

    #[test]
    fn discovery_is_recursive_sorted_and_skips_hidden_and_other_files() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        write(root, "b.berth", b"");
        write(root, "a/z.berth", b"");
        write(root, "a/notes.txt", b"");
        write(root, ".git/x.berth", b"");
        write(root, "a/.hidden.berth", b"");
        let found = discover(&[root.to_path_buf(), root.join("b.berth")]).expect("found");
        let rel: Vec<_> = found
            .iter()
            .map(|p| p.strip_prefix(root).expect("under root").to_path_buf())
            .collect();
        assert_eq!(
            rel,
            vec![PathBuf::from("a/z.berth"), PathBuf::from("b.berth")]
        );
    }

    #[cfg(unix)]
    #[test]
    fn symlink_loops_are_skipped() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        write(root, "sub/a.berth", b"");
        std::os::unix::fs::symlink(root, root.join("sub/loop")).expect("symlink");
        std::os::unix::fs::symlink(root.join("gone"), root.join("sub/dangling")).expect("link");
        let found = discover(&[root.to_path_buf()]).expect("found");
        assert_eq!(found, vec![root.join("sub/a.berth")]);
    }

    #[test]
    fn missing_paths_and_empty_directories_are_errors() {
        let dir = tempfile::tempdir().expect("temp dir");
        let errors = discover(&[dir.path().join("nope")]).expect_err("missing");
        assert!(matches!(errors[..], [LoadError::NotFound { .. }]));
        let errors = discover(&[dir.path().to_path_buf()]).expect_err("empty");
        assert!(matches!(errors[..], [LoadError::NoSources { .. }]));
    }

    #[test]
    fn non_utf8_reports_offset_and_line() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = write(dir.path(), "bad.berth", b"ok\nalso ok\nbad \xff here");
        let err = read_source(&path, 1024).expect_err("not UTF-8");
        assert!(
            matches!(
                err,
                LoadError::NotUtf8 {
                    offset: 15,
                    line: 3,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("offset 15 (line 3)"));
    }

    #[test]
    fn too_large_is_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = write(dir.path(), "big.berth", &[b' '; 100]);
        assert!(matches!(
            read_source(&path, 99),
            Err(LoadError::TooLarge { limit: 99, .. })
        ));
        assert_eq!(read_source(&path, 100).expect("at the limit").len(), 100);
    }

    #[test]
    fn load_pairs_paths_with_file_ids() {
        let dir = tempfile::tempdir().expect("temp dir");
        write(dir.path(), "b.berth", b"b");
        write(dir.path(), "a.berth", b"a");
        let loaded = load(&[dir.path().to_path_buf()], &FsReader).expect("loads");
        assert_eq!(loaded.paths.len(), 2);
        for (file, path) in loaded.sources.files().iter().zip(&loaded.paths) {
            assert_eq!(file.name, path.display().to_string());
        }
        assert_eq!(loaded.sources.files()[0].text, "a");
    }

    #[test]
    fn names_are_relative_to_the_spec() {
        let root = Path::new("examples/three-plants");
        assert_eq!(
            spec_relative_name(root, &root.join("workloads.berth")),
            "workloads.berth"
        );
        assert_eq!(
            spec_relative_name(root, &root.join("sub").join("x.berth")),
            "sub/x.berth"
        );
        let file = Path::new("specs/one.berth");
        assert_eq!(spec_relative_name(file, file), "one.berth");
    }
}
