//! Writing the files the user names: the one writer behind `plan -o`, `render -o`, `approve`,
//! `keys generate` and `fmt`, so that every command that writes takes the same care of what
//! the user already owns.
//!
//! - **Regular files only.** A directory, a device (`/dev/null`), a named pipe or a socket is
//!   refused, never replaced by a regular file (and never opened: a pipe would block).
//! - **Never the input.** [`replace`] is given the files a command read (the spec's sources,
//!   the saved plan) and refuses to write over any of them, compared by device and inode, so
//!   `./x/../spec.berth`, a symlink or a hard link to a source is caught as well as its name.
//! - **Symlinks are followed** to the file they name, which is then held to the same rules: a
//!   link is the user saying where the file lives, and replacing it with a regular file would
//!   silently detach it (dotfile managers, shared folders). A link to nothing is refused with
//!   where it points. [`create_new`] follows nothing: any existing name, a link included, is
//!   "already exists".
//! - **What the file is stays what it was.** A read-only file (no write bit) is refused, not
//!   replaced. A rewrite keeps the file's mode and owner: the new text is written to a
//!   temporary file beside it, given the old mode and owner, flushed, and renamed over it
//!   (atomic: a reader or a crash sees the old text or the new one). When that would break
//!   something — the file has several hard links, or its owner cannot be given to the new file
//!   (only root may give a file away) — the file is rewritten in place instead, through the
//!   same inode, after reserving the space the new text needs (so a full disk fails before the
//!   first byte is overwritten).
//!
//! Errors are data ([`WriteError`], [`IoProblem`]) with a hint each; commands print them with
//! [`crate::report::Ui::problem`] and exit with [`WriteError::exit`].

use crate::report::Exit;
use std::ffi::OsString;
use std::fmt;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// What an operating-system call failed with, in words a user can act on (the errno mapped,
/// not Rust's text of it).
#[derive(Debug)]
pub enum IoProblem {
    /// `ENOSPC`.
    NoSpace,
    /// `EDQUOT`.
    QuotaExceeded,
    /// `EROFS`.
    ReadOnlyFileSystem,
    /// `EACCES`, `EPERM`.
    PermissionDenied,
    /// Anything else, described by the operating system.
    Other(io::Error),
}

impl IoProblem {
    pub fn of(error: io::Error) -> Self {
        match error.kind() {
            io::ErrorKind::StorageFull => IoProblem::NoSpace,
            io::ErrorKind::QuotaExceeded => IoProblem::QuotaExceeded,
            io::ErrorKind::ReadOnlyFilesystem => IoProblem::ReadOnlyFileSystem,
            io::ErrorKind::PermissionDenied => IoProblem::PermissionDenied,
            _ => IoProblem::Other(error),
        }
    }

    /// One sentence on what to do about it.
    pub fn hint(&self) -> &'static str {
        match self {
            IoProblem::NoSpace => "free some space on that file system, then run the command again",
            IoProblem::QuotaExceeded => {
                "free some of your quota on that file system, then run the command again"
            }
            IoProblem::ReadOnlyFileSystem => {
                "that file system is mounted read-only; choose a path on a writable one"
            }
            IoProblem::PermissionDenied => {
                "check the permissions of the file and of the directories above it"
            }
            IoProblem::Other(_) => "check the path and the file system it is on",
        }
    }
}

impl fmt::Display for IoProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IoProblem::NoSpace => f.write_str("no space left on device"),
            IoProblem::QuotaExceeded => f.write_str("disk quota exceeded"),
            IoProblem::ReadOnlyFileSystem => f.write_str("the file system is read-only"),
            IoProblem::PermissionDenied => f.write_str("permission denied"),
            IoProblem::Other(e) => f.write_str(&describe(e)),
        }
    }
}

/// The operating system's description of `e`, in the message style: lowercase first letter,
/// without Rust's ` (os error N)` suffix.
fn describe(e: &io::Error) -> String {
    let text = e.to_string();
    let text = match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => text[..at].to_string(),
        _ => text,
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => text,
    }
}

/// What a path is, when it is not a regular file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    CharacterDevice,
    BlockDevice,
    Fifo,
    Socket,
    Unknown,
}

impl FileKind {
    fn of(meta: &Metadata) -> Self {
        let t = meta.file_type();
        if t.is_char_device() {
            FileKind::CharacterDevice
        } else if t.is_block_device() {
            FileKind::BlockDevice
        } else if t.is_fifo() {
            FileKind::Fifo
        } else if t.is_socket() {
            FileKind::Socket
        } else {
            FileKind::Unknown
        }
    }
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileKind::CharacterDevice => "character device",
            FileKind::BlockDevice => "block device",
            FileKind::Fifo => "named pipe (FIFO)",
            FileKind::Socket => "socket",
            FileKind::Unknown => "special file",
        })
    }
}

/// What an input that a command would have written over is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// A `.berth` file of the spec.
    Source,
    /// Any other file the command read (the saved plan).
    Other,
}

impl InputKind {
    fn of(path: &Path) -> Self {
        if super::has_source_extension(path) {
            InputKind::Source
        } else {
            InputKind::Other
        }
    }
}

impl fmt::Display for InputKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            InputKind::Source => "a source file of the spec",
            InputKind::Other => "a file this command reads",
        })
    }
}

/// Why a file was not written. Every variant names the path; whatever was there before is
/// unchanged.
#[derive(Debug, Error)]
pub enum WriteError {
    #[error("`{}` is a directory, not a file", path.display())]
    IsDirectory { path: PathBuf },
    #[error("`{}` is a {kind}, not a regular file", path.display())]
    NotRegular { path: PathBuf, kind: FileKind },
    #[error("`{}` is {what} (`{}`); berth does not write over its input", path.display(), input.display())]
    IsInput {
        path: PathBuf,
        input: PathBuf,
        what: InputKind,
    },
    #[error("`{}` is read-only", path.display())]
    ReadOnly { path: PathBuf },
    #[error("`{}` already exists", path.display())]
    Exists { path: PathBuf },
    #[error("`{}` is a symbolic link to `{}`, which does not exist", path.display(), target.display())]
    DanglingLink { path: PathBuf, target: PathBuf },
    #[error("cannot write `{}`: the directory `{}` does not exist", path.display(), dir.display())]
    NoDirectory { path: PathBuf, dir: PathBuf },
    #[error("cannot write `{}`: {problem}", path.display())]
    Io { path: PathBuf, problem: IoProblem },
}

impl WriteError {
    fn io(path: &Path, error: io::Error) -> Self {
        WriteError::Io {
            path: path.to_path_buf(),
            problem: IoProblem::of(error),
        }
    }

    /// One sentence on what to do about it.
    pub fn hint(&self) -> &'static str {
        match self {
            WriteError::IsDirectory { .. } | WriteError::NotRegular { .. } => {
                "berth writes regular files only: name a new file or an existing regular file"
            }
            WriteError::IsInput { .. } => "name an output file that is not one of the inputs",
            WriteError::ReadOnly { .. } => {
                "it was left unchanged; make it writable (`chmod u+w`) if it should be rewritten"
            }
            WriteError::Exists { .. } => {
                "berth never overwrites it: choose another name, or move the file away first"
            }
            WriteError::DanglingLink { .. } => "fix or remove the link, or name another file",
            WriteError::NoDirectory { .. } => "create the directory first, or name another path",
            WriteError::Io { problem, .. } => problem.hint(),
        }
    }

    /// A refused target is a mistake in what was asked (1); a failing file system is the
    /// environment (2).
    pub fn exit(&self) -> Exit {
        match self {
            WriteError::NoDirectory { .. } | WriteError::Io { .. } => Exit::Trouble,
            _ => Exit::ErrorsFound,
        }
    }
}

/// `path` with `suffix` appended to its last component, literally: `cp.2025` + `.key` is
/// `cp.2025.key` (where `Path::with_extension` would make `cp.key`).
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(suffix);
    PathBuf::from(name)
}

/// The file a path names, once symlinks are followed: `None` when nothing is there yet.
fn resolve(path: &Path) -> Result<Option<(PathBuf, Metadata)>, WriteError> {
    let link = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let dir = parent(path);
            return match fs::metadata(dir) {
                Ok(_) => Ok(None),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Err(WriteError::NoDirectory {
                    path: path.to_path_buf(),
                    dir: dir.to_path_buf(),
                }),
                Err(e) => Err(WriteError::io(path, e)),
            };
        }
        Err(e) => return Err(WriteError::io(path, e)),
    };
    if !link.file_type().is_symlink() {
        return Ok(Some((path.to_path_buf(), link)));
    }
    match fs::canonicalize(path) {
        Ok(target) => {
            let meta = fs::metadata(&target).map_err(|e| WriteError::io(path, e))?;
            Ok(Some((target, meta)))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(dangling(path)),
        Err(e) => Err(WriteError::io(path, e)),
    }
}

/// The error for a symlink whose target does not exist.
fn dangling(path: &Path) -> WriteError {
    WriteError::DanglingLink {
        path: path.to_path_buf(),
        target: fs::read_link(path).unwrap_or_default(),
    }
}

/// The directory a file is created in (`.` for a bare name).
fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Refuses what is not a regular file, one of `inputs`, or read-only.
fn check_existing(
    path: &Path,
    meta: &Metadata,
    inputs: &[impl AsRef<Path>],
) -> Result<(), WriteError> {
    let path = path.to_path_buf();
    if meta.is_dir() {
        return Err(WriteError::IsDirectory { path });
    }
    if !meta.is_file() {
        let kind = FileKind::of(meta);
        return Err(WriteError::NotRegular { path, kind });
    }
    for input in inputs {
        let input = input.as_ref();
        if fs::metadata(input).is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino()) {
            let what = InputKind::of(input);
            let input = input.to_path_buf();
            return Err(WriteError::IsInput { path, input, what });
        }
    }
    if meta.permissions().mode() & 0o222 == 0 {
        return Err(WriteError::ReadOnly { path });
    }
    Ok(())
}

/// Writes `bytes` to `path`, creating it (mode 0644) or replacing the contents of the regular
/// file there (keeping its mode, owner and hard links), and never writing over any of
/// `inputs`. See the module documentation for every rule.
pub fn replace(path: &Path, bytes: &[u8], inputs: &[impl AsRef<Path>]) -> Result<(), WriteError> {
    let Some((target, meta)) = resolve(path)? else {
        return write_new(path, bytes, None).map_err(|f| f.error(path));
    };
    check_existing(path, &meta, inputs)?;
    // Opening for writing (never truncating) proves we may write it; non-blocking, so that
    // a pipe put there since the check cannot hang us, and checked again once open.
    let file = OpenOptions::new()
        .write(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(&target)
        .map_err(|e| WriteError::io(path, e))?;
    let opened = file.metadata().map_err(|e| WriteError::io(path, e))?;
    if opened.dev() != meta.dev() || opened.ino() != meta.ino() {
        return Err(WriteError::io(
            path,
            io::Error::other("the file changed while it was being written"),
        ));
    }
    check_existing(path, &opened, inputs)?;
    if opened.nlink() == 1 {
        match write_new(&target, bytes, Some(&opened)) {
            Err(Fallback::InPlace) => {}
            Err(Fallback::Failed(e)) => return Err(e),
            Ok(()) => return Ok(()),
        }
    }
    rewrite_in_place(file, bytes).map_err(|e| WriteError::io(path, e))
}

/// [`replace`], after creating the directories above `path` that are missing (`render -o
/// DIR` writes `DIR/CONTEXT/NAMESPACE.yaml`).
pub fn create_dirs_and_replace(
    path: &Path,
    bytes: &[u8],
    inputs: &[impl AsRef<Path>],
) -> Result<(), WriteError> {
    fs::create_dir_all(parent(path)).map_err(|e| WriteError::io(parent(path), e))?;
    replace(path, bytes, inputs)
}

/// Why [`write_new`] did not replace the file.
enum Fallback {
    /// The new file could not be given the old one's owner: rewrite in place instead.
    InPlace,
    Failed(WriteError),
}

impl Fallback {
    fn error(self, path: &Path) -> WriteError {
        match self {
            Fallback::Failed(e) => e,
            Fallback::InPlace => WriteError::io(path, io::Error::other("cannot keep its owner")),
        }
    }
}

/// Writes `bytes` to a temporary file beside `path`, flushed, with `old`'s mode and owner (or
/// 0644 for a new file), and renames it over `path`.
fn write_new(path: &Path, bytes: &[u8], old: Option<&Metadata>) -> Result<(), Fallback> {
    let io = |e| Fallback::Failed(WriteError::io(path, e));
    // Hidden, so that `berth check DIR` never picks up a leftover after a crash.
    let mut temp = tempfile::Builder::new()
        .prefix(".berth-")
        .suffix(".tmp")
        .tempfile_in(parent(path))
        .map_err(io)?;
    if let Some(old) = old {
        let mine = temp.as_file().metadata().map_err(io)?;
        if (mine.uid(), mine.gid()) != (old.uid(), old.gid())
            && std::os::unix::fs::fchown(temp.as_file(), Some(old.uid()), Some(old.gid())).is_err()
        {
            return Err(Fallback::InPlace);
        }
    }
    // After the owner: changing the owner may clear set-id bits.
    let mode = old.map_or(0o644, |m| m.permissions().mode() & 0o7777);
    temp.as_file()
        .set_permissions(fs::Permissions::from_mode(mode))
        .map_err(io)?;
    temp.write_all(bytes).map_err(io)?;
    temp.as_file().sync_all().map_err(io)?;
    if old.is_none() {
        // A file made since we looked is not ours to replace.
        temp.persist_noclobber(path).map_err(|e| {
            if e.error.kind() == io::ErrorKind::AlreadyExists {
                Fallback::Failed(WriteError::Exists {
                    path: path.to_path_buf(),
                })
            } else {
                io(e.error)
            }
        })?;
    } else {
        temp.persist(path).map_err(|e| io(e.error))?;
    }
    Ok(())
}

/// Rewrites an open file's contents through its own inode (hard links and owner stay), after
/// reserving the blocks the new text needs so that a full disk fails before anything is
/// overwritten (where the file system can reserve; otherwise the write is attempted).
fn rewrite_in_place(mut file: File, bytes: &[u8]) -> io::Result<()> {
    let len = bytes.len() as u64;
    match rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::KEEP_SIZE, 0, len) {
        Ok(()) => {}
        Err(e) if e == rustix::io::Errno::NOSPC || e == rustix::io::Errno::DQUOT => {
            return Err(e.into());
        }
        Err(_) => {} // not supported here: nothing reserved, nothing lost
    }
    // Non-blocking was for the open only.
    file.write_all(bytes)?;
    file.set_len(len)?;
    file.sync_all()
}

/// Creates `path` with `bytes` and `mode`, refusing any existing name (a symlink, even a
/// dangling one, included). A file that cannot be written in full is removed again.
pub fn create_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), WriteError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => WriteError::Exists {
                path: path.to_path_buf(),
            },
            io::ErrorKind::NotFound => WriteError::NoDirectory {
                path: path.to_path_buf(),
                dir: parent(path).to_path_buf(),
            },
            _ => WriteError::io(path, e),
        })?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    if let Err(e) = written {
        drop(file);
        let _ = fs::remove_file(path);
        return Err(WriteError::io(path, e));
    }
    Ok(())
}

/// Refuses `path` if anything exists under that name (a dangling symlink included): what
/// [`create_new`] would refuse, asked before writing anything else.
pub fn refuse_existing(path: &Path) -> Result<(), WriteError> {
    match fs::symlink_metadata(path) {
        Ok(_) => Err(WriteError::Exists {
            path: path.to_path_buf(),
        }),
        Err(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_INPUTS: &[&Path] = &[];

    #[test]
    fn errno_is_mapped_to_words() {
        let cases = [
            (28, "no space left on device"),      // ENOSPC
            (122, "disk quota exceeded"),         // EDQUOT
            (30, "the file system is read-only"), // EROFS
            (13, "permission denied"),            // EACCES
            (1, "permission denied"),             // EPERM
            (5, "input/output error"),            // EIO
        ];
        for (errno, text) in cases {
            let problem = IoProblem::of(io::Error::from_raw_os_error(errno));
            assert_eq!(problem.to_string(), text, "errno {errno}");
        }
        let full = WriteError::io(Path::new("plan.json"), io::Error::from_raw_os_error(28));
        assert_eq!(
            full.to_string(),
            "cannot write `plan.json`: no space left on device"
        );
        assert!(!full.hint().contains("permission"), "{}", full.hint());
        assert_eq!(full.exit(), Exit::Trouble);
    }

    #[test]
    fn suffixes_are_literal() {
        assert_eq!(
            with_suffix(Path::new("keys/cp.2025"), ".key"),
            Path::new("keys/cp.2025.key")
        );
    }

    #[test]
    fn new_files_are_0644_and_existing_ones_keep_their_mode() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("plan.json");
        replace(&path, b"one\n", NO_INPUTS).expect("created");
        let mode = |p: &Path| fs::metadata(p).expect("stat").permissions().mode() & 0o7777;
        assert_eq!(mode(&path), 0o644);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).expect("chmod");
        replace(&path, b"two\n", NO_INPUTS).expect("replaced");
        assert_eq!(mode(&path), 0o640);
        assert_eq!(fs::read_to_string(&path).expect("read"), "two\n");
    }

    #[test]
    fn a_shorter_text_in_place_leaves_no_tail() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("a.berth");
        fs::write(&path, "a long old text\n").expect("write");
        let file = OpenOptions::new().write(true).open(&path).expect("open");
        rewrite_in_place(file, b"short\n").expect("rewritten");
        assert_eq!(fs::read_to_string(&path).expect("read"), "short\n");
    }
}
