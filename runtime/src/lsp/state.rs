//! The server's state: open documents (which overlay the files on disk), and one compiled
//! spec per directory, recompiled once the edits of that directory have been quiet for a
//! while (the debounce), or as soon as a request needs it. Diagnostics are published for the
//! changed files and for every other file whose diagnostics changed (a client keeps the last
//! publication of a file, so republishing an unchanged one only costs time).

use super::convert;
use berth_compiler::driver;
use berth_compiler::ide::Analysis;
use berth_compiler::source::{FileId, SourceFile, SourceMap};
use crossbeam_channel::Sender;
use lsp_server::{Message, Notification};
use lsp_types as lsp;
use lsp_types::notification::{Notification as _, PublishDiagnostics};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The shortest and longest quiet period before a directory with edits is recompiled; in
/// between, three times its last compile: a spec that compiles in 5 ms is checked 20 ms
/// after a keystroke, one that takes a second waits 250 ms for the typing to stop.
pub const QUIET_MIN: Duration = Duration::from_millis(20);
pub const QUIET_MAX: Duration = Duration::from_millis(250);

/// The quiet period after an edit of a directory whose last compile took `cost`.
fn quiet(cost: Duration) -> Duration {
    (cost * 3).clamp(QUIET_MIN, QUIET_MAX)
}

/// A directory with edits not compiled yet.
struct Dirty {
    /// The files edited (opened, changed, closed, saved) since its last compile.
    touched: BTreeSet<PathBuf>,
    /// When it is compiled if no other edit comes first.
    due: Instant,
}

/// One spec directory, compiled.
pub struct Spec {
    /// `paths[i]` is file `FileId(i)` of the analysis.
    pub paths: Vec<PathBuf>,
    /// Shared with hover threads (a workload hover runs the planner off the message loop).
    pub analysis: Arc<Analysis>,
    /// The directory's what-if files (`NAME.what-if.berth`), each checked against the spec.
    pub what_ifs: Vec<WhatIf>,
}

/// A what-if file checked against the spec of its directory.
pub struct WhatIf {
    pub path: PathBuf,
    /// The spec's files (ids as in the analysis) and the what-if file, last.
    pub sources: SourceMap,
    /// What the changed spec has that the spec alone does not ([`driver::check_what_if`]).
    pub diagnostics: Vec<berth_compiler::diagnostics::Diagnostic>,
}

impl Spec {
    pub fn file_id(&self, path: &Path) -> Option<FileId> {
        self.paths
            .iter()
            .position(|p| p == path)
            .map(|i| FileId(i as u32))
    }

    pub fn file(&self, id: FileId) -> Option<&SourceFile> {
        self.analysis.sources.get(id)
    }
}

pub struct Server {
    sender: Sender<Message>,
    /// The text of every open document, by path; it wins over the file on disk.
    pub open: BTreeMap<PathBuf, String>,
    /// Compiled specs, by directory.
    specs: BTreeMap<PathBuf, Spec>,
    /// What was last published for each file, by directory: a file is published again only
    /// when its diagnostics change, and a file which left the spec (deleted, closed and
    /// unsaved) is cleared.
    published: BTreeMap<PathBuf, BTreeMap<PathBuf, Vec<lsp::Diagnostic>>>,
    /// Serves queries on standard-library documents.
    std_only: Option<Analysis>,
    /// The version of every open document, as the client numbers them.
    versions: BTreeMap<PathBuf, i32>,
    /// Directories whose edits are not compiled yet.
    dirty: BTreeMap<PathBuf, Dirty>,
    /// How long the last compile of each directory took.
    cost: BTreeMap<PathBuf, Duration>,
}

impl Server {
    pub fn new(sender: Sender<Message>) -> Server {
        Server {
            sender,
            open: BTreeMap::new(),
            specs: BTreeMap::new(),
            published: BTreeMap::new(),
            std_only: None,
            versions: BTreeMap::new(),
            dirty: BTreeMap::new(),
            cost: BTreeMap::new(),
        }
    }

    /// Records the version of an open document (`None`: it was closed).
    pub fn set_version(&mut self, path: &Path, version: Option<i32>) {
        match version {
            Some(v) => self.versions.insert(path.to_path_buf(), v),
            None => self.versions.remove(path),
        };
    }

    /// `path` was edited: its directory is compiled after a quiet period, which this edit
    /// starts again.
    pub fn touched(&mut self, path: &Path) {
        let Some(dir) = path.parent().map(Path::to_path_buf) else {
            return;
        };
        let cost = self.cost.get(&dir).copied().unwrap_or_default();
        let due = Instant::now() + quiet(cost);
        let dirty = self.dirty.entry(dir).or_insert_with(|| Dirty {
            touched: BTreeSet::new(),
            due,
        });
        dirty.touched.insert(path.to_path_buf());
        dirty.due = due;
    }

    /// When the next directory is due to be compiled.
    pub fn next_due(&self) -> Option<Instant> {
        self.dirty.values().map(|d| d.due).min()
    }

    /// The directories due to be compiled at `now`.
    pub fn due(&self, now: Instant) -> Vec<PathBuf> {
        let due = self.dirty.iter().filter(|(_, d)| d.due <= now);
        due.map(|(dir, _)| dir.clone()).collect()
    }

    /// After a panic: compiled specs may be half-updated; drop them (open texts stay).
    pub fn recover(&mut self) {
        self.specs.clear();
    }

    /// The spec `path` belongs to, compiled if it is not yet, or if it has edits not
    /// compiled yet (a request is always answered about every edit sent before it).
    pub fn spec_of(&mut self, path: &Path) -> Option<&Spec> {
        let dir = path.parent()?.to_path_buf();
        if self.dirty.contains_key(&dir) {
            self.refresh(&dir, |_| false);
        }
        if !self.specs.contains_key(&dir) {
            let spec = self.compile(&dir);
            self.specs.insert(dir.clone(), spec);
        }
        self.specs.get(&dir)
    }

    /// An analysis of no user files, for queries on the standard library's documents.
    pub fn std_analysis(&mut self) -> &Analysis {
        self.std_only
            .get_or_insert_with(|| Analysis::new(SourceMap::new()))
    }

    /// The files of directory `dir`: `.berth` files on disk and open documents there, in
    /// path order, open texts overlaying the disk.
    fn compile(&self, dir: &Path) -> Spec {
        let mut paths: BTreeSet<PathBuf> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_file() && crate::files::has_source_extension(p))
            .collect();
        paths.extend(
            self.open
                .keys()
                .filter(|p| p.parent() == Some(dir))
                .cloned(),
        );
        let (what_if_paths, paths): (Vec<PathBuf>, Vec<PathBuf>) =
            paths.into_iter().partition(|p| crate::files::is_what_if(p));
        let mut sources = SourceMap::new();
        let mut kept = Vec::new();
        for path in paths {
            let Some(text) = self.text_of(&path) else {
                continue;
            };
            sources.add(path.display().to_string(), text);
            kept.push(path);
        }
        let base = driver::all_files(&sources);
        let analysis = Analysis::new(sources);
        let what_ifs = what_if_paths
            .into_iter()
            .filter_map(|path| {
                let text = self.text_of(&path)?;
                let mut with = analysis.sources.clone();
                let id = with.add(path.display().to_string(), text);
                let diagnostics = driver::check_what_if(&with, &base, id, analysis.diagnostics());
                Some(WhatIf {
                    path,
                    sources: with,
                    diagnostics,
                })
            })
            .collect();
        Spec {
            paths: kept,
            analysis: Arc::new(analysis),
            what_ifs,
        }
    }

    /// The open text of `path`, else the file on disk (`None`, logged, when it cannot be read).
    fn text_of(&self, path: &Path) -> Option<String> {
        if let Some(text) = self.open.get(path) {
            return Some(text.clone());
        }
        match crate::files::read_source(path, driver::MAX_FILE_BYTES) {
            Ok(text) => Some(text),
            Err(e) => {
                eprintln!("berth lsp: {e}");
                None
            }
        }
    }

    /// Compiles directory `dir` with its edits and publishes the diagnostics of every file of
    /// it that changed, clearing files that left it. The edited files are always published,
    /// last: once their publication arrives, every file's diagnostics are current. If
    /// `superseded(dir)` says newer edits of `dir` arrived while it compiled, the result is
    /// dropped unpublished and `dir` waits for its next quiet period.
    pub fn refresh(&mut self, dir: &Path, superseded: impl FnOnce(&Path) -> bool) {
        let Some(dirty) = self.dirty.remove(dir) else {
            return;
        };
        let started = Instant::now();
        let spec = self.compile(dir);
        self.cost.insert(dir.to_path_buf(), started.elapsed());
        if superseded(dir) {
            let due = Instant::now() + quiet(started.elapsed());
            self.dirty.insert(dir.to_path_buf(), Dirty { due, ..dirty });
            return;
        }
        let edited = &dirty.touched;
        let now = diagnostics_by_path(&spec);
        let before = self.published.remove(dir).unwrap_or_default();
        for (gone, diagnostics) in &before {
            if !edited.contains(gone) && !now.contains_key(gone) && !diagnostics.is_empty() {
                self.publish(gone, Vec::new());
            }
        }
        let others = now.iter().filter(|(p, _)| !edited.contains(p.as_path()));
        for (p, diagnostics) in others {
            if before.get(p) != Some(diagnostics) {
                self.publish(p, diagnostics.clone());
            }
        }
        for path in edited {
            if let Some(diagnostics) = now.get(path) {
                self.publish(path, diagnostics.clone());
            } else if before.contains_key(path) {
                self.publish(path, Vec::new());
            }
        }
        self.published.insert(dir.to_path_buf(), now);
        self.specs.insert(dir.to_path_buf(), spec);
    }

    fn publish(&self, path: &Path, diagnostics: Vec<lsp::Diagnostic>) {
        let params = lsp::PublishDiagnosticsParams {
            uri: convert::path_to_uri(path),
            diagnostics,
            version: self.versions.get(path).copied(),
        };
        let n = Notification::new(PublishDiagnostics::METHOD.into(), params);
        // A closed channel means the client is gone; the main loop ends by itself.
        let _ = self.sender.send(n.into());
    }
}

/// The protocol diagnostics of every file of `spec` (an empty list for a clean file).
fn diagnostics_by_path(spec: &Spec) -> BTreeMap<PathBuf, Vec<lsp::Diagnostic>> {
    let locate = |id: FileId| {
        let f = spec.file(id)?;
        Some((
            convert::path_to_uri(spec.paths.get(id.0 as usize)?),
            f.clone(),
        ))
    };
    let mut by_path: BTreeMap<PathBuf, Vec<lsp::Diagnostic>> =
        spec.paths.iter().map(|p| (p.clone(), Vec::new())).collect();
    for d in spec.analysis.diagnostics() {
        let id = d.primary.span.file;
        if let (Some(file), Some(path)) = (spec.file(id), spec.paths.get(id.0 as usize))
            && let Some(list) = by_path.get_mut(path)
        {
            list.push(convert::diagnostic(d, file, &locate));
        }
    }
    for what_if in &spec.what_ifs {
        by_path.insert(what_if.path.clone(), what_if_diagnostics(spec, what_if));
    }
    by_path
}

/// A what-if file's diagnostics. One in a spec file (there only because of the change) is
/// shown at the start of the what-if file, naming where it is, with a link to the place.
fn what_if_diagnostics(spec: &Spec, what_if: &WhatIf) -> Vec<lsp::Diagnostic> {
    let own = FileId(spec.paths.len() as u32);
    let path_of = |id: FileId| {
        if id == own {
            Some(&what_if.path)
        } else {
            spec.paths.get(id.0 as usize)
        }
    };
    let locate = |id: FileId| {
        let f = what_if.sources.get(id)?;
        Some((convert::path_to_uri(path_of(id)?), f.clone()))
    };
    let Some(own_file) = what_if.sources.get(own) else {
        return Vec::new();
    };
    what_if
        .diagnostics
        .iter()
        .filter_map(|d| {
            let id = d.primary.span.file;
            if id == own {
                return Some(convert::diagnostic(d, own_file, &locate));
            }
            let file = what_if.sources.get(id)?;
            let (uri, _) = locate(id)?;
            let mut shown = convert::diagnostic(d, file, &locate);
            let related = lsp::DiagnosticRelatedInformation {
                location: lsp::Location::new(uri, shown.range),
                message: "here".into(),
            };
            shown.message = format!("in `{}`: {}", file.name, shown.message);
            shown.range = lsp::Range::default();
            shown
                .related_information
                .get_or_insert_with(Vec::new)
                .insert(0, related);
            Some(shown)
        })
        .collect()
}
