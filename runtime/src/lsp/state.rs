//! The server's state: open documents (which overlay the files on disk), and one compiled
//! spec per directory, recompiled after every change and published in full.

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
    /// The files of each directory that were last published with diagnostics, so that a
    /// file which left the spec (deleted, closed and unsaved) is cleared.
    published: BTreeMap<PathBuf, BTreeSet<PathBuf>>,
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
                None => match crate::files::read_source(
                    &path,
                    berth_compiler::syntax::limits::MAX_FILE_BYTES,
                ) {
                    Ok(text) => text,
                    Err(e) => {
                        eprintln!("berth lsp: {e}");
                        continue;
                    }
                },
            };
            sources.add(path.display().to_string(), text);
            kept.push(path);
        }
        Spec {
            paths: kept,
            analysis: Arc::new(Analysis::new(sources)),
        }
    }

    /// Recompiles the spec of `path`'s directory and publishes diagnostics for every file
    /// of it, clearing files that are clean or left it.
    pub fn changed(&mut self, path: &Path) {
        let Some(dir) = path.parent().map(Path::to_path_buf) else {
            return;
        };
        let spec = self.compile(&dir);
        let mut by_file: BTreeMap<FileId, Vec<lsp::Diagnostic>> = BTreeMap::new();
        let locate = |id: FileId| {
            let f = spec.file(id)?;
            Some((
                convert::path_to_uri(spec.paths.get(id.0 as usize)?),
                f.clone(),
            ))
        };
        for d in spec.analysis.diagnostics() {
            let id = d.primary.span.file;
            if let Some(file) = spec.file(id) {
                by_file
                    .entry(id)
                    .or_default()
                    .push(convert::diagnostic(d, file, &locate));
            }
        }
        let now: BTreeSet<PathBuf> = spec.paths.iter().cloned().collect();
        let before = self
            .published
            .insert(dir.clone(), now.clone())
            .unwrap_or_default();
        for gone in before.difference(&now) {
            self.publish(gone, Vec::new());
        }
        for (i, p) in spec.paths.iter().enumerate() {
            let diags = by_file.remove(&FileId(i as u32)).unwrap_or_default();
            self.publish(p, diags);
        }
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
