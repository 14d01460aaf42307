//! The refreshing terminal view of `berth top` (ratatui on crossterm): pools on top, then the
//! allocations, idle ones marked; `s` changes the order (GPUs, workload, target, utilisation),
//! `/` filters by text (workload, identity, target or pool), `Esc` clears it, `q` quits.
//! Snapshots are read on a thread of their own every `interval`, so keys never wait for a
//! slow cluster; a source that stops answering is shown in the header.

use super::top_snapshot::{AllocationRow, Snapshot};
use crate::report::{Exit, Ui};
use ratatui::Frame;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Row, Table};
use std::io;
use std::sync::mpsc;
use std::time::Duration;

/// How the allocations are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    Gpus,
    Workload,
    Target,
    Utilization,
}

impl Order {
    fn next(self) -> Order {
        match self {
            Order::Gpus => Order::Workload,
            Order::Workload => Order::Target,
            Order::Target => Order::Utilization,
            Order::Utilization => Order::Gpus,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Order::Gpus => "gpus",
            Order::Workload => "workload",
            Order::Target => "target",
            Order::Utilization => "utilisation",
        }
    }
}

/// What the person asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewState {
    pub order: Order,
    pub filter: String,
    /// Typing a filter.
    pub editing: bool,
}

impl Default for ViewState {
    fn default() -> Self {
        ViewState {
            order: Order::Gpus,
            filter: String::new(),
            editing: false,
        }
    }
}

/// The allocations shown: filtered, then ordered (ties by target, pool, workload).
pub fn shown<'a>(snap: &'a Snapshot, view: &ViewState) -> Vec<&'a AllocationRow> {
    let needle = view.filter.to_lowercase();
    let mut rows: Vec<&AllocationRow> = snap
        .allocations
        .iter()
        .filter(|a| {
            needle.is_empty()
                || [
                    a.workload.as_str(),
                    a.identity.as_deref().unwrap_or(""),
                    a.target.as_str(),
                    a.pool.as_str(),
                ]
                .iter()
                .any(|f| f.to_lowercase().contains(&needle))
        })
        .collect();
    let key = |a: &&AllocationRow| (a.target.clone(), a.pool.clone(), a.workload.clone());
    rows.sort_by(|a, b| {
        let first = match view.order {
            Order::Gpus => b.gpus.cmp(&a.gpus),
            Order::Workload => a.workload.cmp(&b.workload),
            Order::Target => a.target.cmp(&b.target),
            Order::Utilization => a
                .utilization
                .unwrap_or(f64::INFINITY)
                .total_cmp(&b.utilization.unwrap_or(f64::INFINITY)),
        };
        first.then_with(|| key(a).cmp(&key(b)))
    });
    rows
}

/// One frame.
pub fn draw(frame: &mut Frame<'_>, snap: &Snapshot, view: &ViewState) {
    let unreachable: Vec<String> = snap
        .sources
        .iter()
        .filter(|s| s.state != "reachable")
        .map(|s| format!("{} `{}` unreachable: {}", s.kind, s.name, s.state))
        .collect();
    let header = [
        Constraint::Length(1 + unreachable.len() as u16),
        Constraint::Length(snap.pools.len() as u16 + 3),
        Constraint::Min(3),
        Constraint::Length(1),
    ];
    let [top, pools_area, rows_area, help] = Layout::vertical(header).areas(frame.area());
    let mut lines = vec![Line::from(format!(
        "berth top — plan {} — {} sources",
        snap.plan_id.chars().take(19).collect::<String>(),
        snap.sources.len()
    ))];
    lines.extend(unreachable.into_iter().map(Line::from));
    frame.render_widget(Paragraph::new(lines), top);

    let bold = Style::default().add_modifier(Modifier::BOLD);
    let pools = Table::new(
        snap.pools.iter().map(|p| {
            Row::new(vec![
                p.target.clone(),
                p.pool.clone(),
                p.resource.clone(),
                format!("{}/{}", p.allocated, p.total),
            ])
        }),
        [
            Constraint::Percentage(30),
            Constraint::Percentage(20),
            Constraint::Percentage(30),
            Constraint::Percentage(20),
        ],
    )
    .header(Row::new(vec!["TARGET", "POOL", "RESOURCE", "ALLOCATED"]).style(bold))
    .block(Block::bordered().title("pools"));
    frame.render_widget(pools, pools_area);

    let rows = shown(snap, view);
    let table = Table::new(
        rows.iter().map(|a| {
            Row::new(vec![
                a.workload.clone(),
                a.identity.clone().unwrap_or_else(|| "-".into()),
                format!("{}/{}", a.target, a.pool),
                a.gpus.to_string(),
                a.utilization
                    .map_or_else(|| "-".into(), |u| format!("{u:.0}%")),
                if a.idle { "idle".into() } else { String::new() },
            ])
        }),
        [
            Constraint::Percentage(25),
            Constraint::Percentage(25),
            Constraint::Percentage(25),
            Constraint::Percentage(8),
            Constraint::Percentage(9),
            Constraint::Percentage(8),
        ],
    )
    .header(
        Row::new(vec![
            "WORKLOAD",
            "IDENTITY",
            "TARGET/POOL",
            "GPUS",
            "UTIL",
            "",
        ])
        .style(bold),
    )
    .block(Block::bordered().title(format!(
        "allocations by {}{}",
        view.order.name(),
        if view.filter.is_empty() {
            String::new()
        } else {
            format!(" matching `{}`", view.filter)
        }
    )));
    frame.render_widget(table, rows_area);
    let keys = if view.editing {
        format!("filter: {}▏ (Enter: keep, Esc: clear)", view.filter)
    } else {
        "q quit · s order · / filter · Esc clear filter".to_string()
    };
    frame.render_widget(Paragraph::new(keys), help);
}

/// Applies a key; `false` when it asks to quit.
pub fn key(view: &mut ViewState, code: KeyCode) -> bool {
    if view.editing {
        match code {
            KeyCode::Enter => view.editing = false,
            KeyCode::Esc => {
                view.editing = false;
                view.filter.clear();
            }
            KeyCode::Backspace => {
                view.filter.pop();
            }
            KeyCode::Char(c) => view.filter.push(c),
            _ => {}
        }
        return true;
    }
    match code {
        KeyCode::Char('q') => return false,
        KeyCode::Char('s') => view.order = view.order.next(),
        KeyCode::Char('/') => view.editing = true,
        KeyCode::Esc => view.filter.clear(),
        _ => {}
    }
    true
}

/// Whether stdin and stdout are a terminal the view can take over.
pub fn on_a_terminal() -> bool {
    use std::io::IsTerminal;
    io::stdout().is_terminal() && io::stdin().is_terminal()
}

/// Runs the view until `q`; `gather` reads a snapshot.
pub fn run(
    gather: impl Fn() -> Result<Snapshot, String> + Sync,
    interval: f64,
    ui: &mut Ui<'_>,
) -> io::Result<Exit> {
    let interval = Duration::try_from_secs_f64(interval.max(0.2)).unwrap_or(Duration::from_secs(2));
    let first = match gather() {
        Ok(snap) => snap,
        Err(message) => {
            ui.problem(&message, None)?;
            return Ok(Exit::Trouble);
        }
    };
    let (send, receive) = mpsc::channel::<Result<Snapshot, String>>();
    let (stop_send, stop) = mpsc::channel::<()>();
    std::thread::scope(|scope| {
        let gather = &gather;
        scope.spawn(move || {
            while stop.recv_timeout(interval) == Err(mpsc::RecvTimeoutError::Timeout) {
                if send.send(gather()).is_err() {
                    break;
                }
            }
        });
        let mut terminal = ratatui::init();
        let mut snap = first;
        let mut view = ViewState::default();
        let mut problem = None;
        let result = loop {
            if let Ok(next) = receive.try_recv() {
                match next {
                    Ok(next) => snap = next,
                    Err(e) => problem = Some(e),
                }
            }
            if let Err(e) = terminal.draw(|frame| draw(frame, &snap, &view)) {
                break Err(e);
            }
            match event::poll(Duration::from_millis(200)) {
                Ok(true) => match event::read() {
                    Ok(Event::Key(k)) if k.kind == KeyEventKind::Press => {
                        if !key(&mut view, k.code) {
                            break Ok(());
                        }
                    }
                    Ok(_) => {}
                    Err(e) => break Err(e),
                },
                Ok(false) => {}
                Err(e) => break Err(e),
            }
        };
        ratatui::restore();
        let _ = stop_send.send(());
        if let Some(e) = problem {
            let _ = ui.problem(&e, None);
        }
        result.map(|()| Exit::Clean)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::top_snapshot::{PoolRow, Source};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    fn snapshot() -> Snapshot {
        let row =
            |workload: &str, target: &str, gpus: i64, utilization: Option<f64>| AllocationRow {
                target: target.into(),
                pool: "serve".into(),
                workload: workload.into(),
                identity: Some(format!("service_account(\"{workload}\")")),
                gpus,
                utilization,
                idle: utilization.is_some_and(|u| u < 5.0),
            };
        Snapshot {
            plan_id: "sha256:0123456789abcdef".into(),
            sources: vec![Source {
                kind: "agent",
                name: "rig".into(),
                state: "connection refused".into(),
            }],
            pools: vec![PoolRow {
                target: "fra".into(),
                pool: "serve".into(),
                resource: "nvidia.com/gpu".into(),
                allocated: 5,
                total: 8,
            }],
            allocations: vec![
                row("chat", "fra", 4, Some(87.0)),
                row("notebook", "fra", 1, Some(0.0)),
                row("embed", "muc", 2, None),
            ],
            identities: Vec::new(),
        }
    }

    #[test]
    fn keys_order_and_filter() {
        let snap = snapshot();
        let mut view = ViewState::default();
        let names = |view: &ViewState| -> Vec<String> {
            shown(&snap, view)
                .iter()
                .map(|a| a.workload.clone())
                .collect()
        };
        assert_eq!(names(&view), ["chat", "embed", "notebook"]);
        assert!(key(&mut view, KeyCode::Char('s')));
        assert_eq!(names(&view), ["chat", "embed", "notebook"]);
        key(&mut view, KeyCode::Char('s'));
        key(&mut view, KeyCode::Char('s'));
        assert_eq!(view.order, Order::Utilization);
        assert_eq!(names(&view), ["notebook", "chat", "embed"]);
        key(&mut view, KeyCode::Char('/'));
        for c in "MUC".chars() {
            key(&mut view, KeyCode::Char(c));
        }
        key(&mut view, KeyCode::Enter);
        assert_eq!(names(&view), ["embed"]);
        key(&mut view, KeyCode::Esc);
        assert_eq!(names(&view).len(), 3);
        assert!(!key(&mut view, KeyCode::Char('q')));
    }

    #[test]
    fn a_frame_shows_pools_allocations_idle_and_the_unreachable() {
        let mut terminal = Terminal::new(TestBackend::new(100, 20)).expect("terminal");
        terminal
            .draw(|frame| draw(frame, &snapshot(), &ViewState::default()))
            .expect("draw");
        let text: String = terminal
            .backend()
            .buffer()
            .content()
            .chunks(100)
            .map(|line| line.iter().map(|c| c.symbol()).collect::<String>() + "\n")
            .collect();
        assert!(
            text.contains("agent `rig` unreachable: connection refused"),
            "{text}"
        );
        assert!(text.contains("5/8"), "{text}");
        assert!(text.contains("idle"), "{text}");
        assert!(text.contains("87%"), "{text}");
        let chat = text.find("chat").expect("chat");
        let notebook = text.find("notebook").expect("notebook");
        assert!(chat < notebook, "ordered by GPUs:\n{text}");
        insta::assert_snapshot!(text);
    }
}
