//! The server's state: open documents (which overlay the files on disk), and one compiled
//! spec per directory, recompiled after every change. Diagnostics are published for the
//! changed file and for every other file whose diagnostics changed (a client keeps the last
//! publication of a file, so republishing an unchanged one only costs time).

use super::convert;
use berth_compiler::ide::Analysis;
use berth_compiler::source::{FileId, SourceFile, SourceMap};
use crossbeam_channel::Sender;
use lsp_server::{Message, Notification};
use lsp_types as lsp;
use lsp_types::notification::{Notification as _, PublishDiagnostics};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One spec directory, compiled.
pub struct Spec {
    /// `paths[i]` is file `FileId(i)` of the analysis.
    pub paths: Vec<PathBuf>,
    /// Shared with hover threads (a workload hover runs the planner off the message loop).
    pub analysis: Arc<Analysis>,
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
}

impl Server {
    pub fn new(sender: Sender<Message>) -> Server {
        Server {
            sender,
            open: BTreeMap::new(),
            specs: BTreeMap::new(),
            published: BTreeMap::new(),
            std_only: None,
        }
    }

    /// After a panic: compiled specs may be half-updated; drop them (open texts stay).
    pub fn recover(&mut self) {
        self.specs.clear();
    }

    /// The spec `path` belongs to, compiled if it is not yet.
    pub fn spec_of(&mut self, path: &Path) -> Option<&Spec> {
        let dir = path.parent()?.to_path_buf();
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
        let mut sources = SourceMap::new();
        let mut kept = Vec::new();
        for path in paths {
            let text = match self.open.get(&path) {
                Some(text) => text.clone(),
                None => {
                    match crate::files::read_source(&path, berth_compiler::driver::MAX_FILE_BYTES) {
                        Ok(text) => text,
                        Err(e) => {
                            eprintln!("berth lsp: {e}");
                            continue;
                        }
                    }
                }
            };
            sources.add(path.display().to_string(), text);
            kept.push(path);
        }
        Spec {
            paths: kept,
            analysis: Arc::new(Analysis::new(sources)),
        }
    }

    /// Recompiles the spec of `path`'s directory and publishes the diagnostics of every
    /// file of it that changed, clearing files that left it. `path` itself is always
    /// published, last: once its publication arrives, every file's diagnostics are current.
    pub fn changed(&mut self, path: &Path) {
        let Some(dir) = path.parent().map(Path::to_path_buf) else {
            return;
        };
        let spec = self.compile(&dir);
        let now = diagnostics_by_path(&spec);
        let before = self.published.remove(&dir).unwrap_or_default();
        for (gone, diagnostics) in &before {
            if gone != path && !now.contains_key(gone) && !diagnostics.is_empty() {
                self.publish(gone, Vec::new());
            }
        }
        let others = now.iter().filter(|(p, _)| p.as_path() != path);
        for (p, diagnostics) in others {
            if before.get(p) != Some(diagnostics) {
                self.publish(p, diagnostics.clone());
            }
        }
        if let Some(diagnostics) = now.get(path) {
            self.publish(path, diagnostics.clone());
        } else if before.contains_key(path) {
            self.publish(path, Vec::new());
        }
        self.published.insert(dir.clone(), now);
        self.specs.insert(dir, spec);
    }

    fn publish(&self, path: &Path, diagnostics: Vec<lsp::Diagnostic>) {
        let params = lsp::PublishDiagnosticsParams {
            uri: convert::path_to_uri(path),
            diagnostics,
            version: None,
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
    by_path
}
