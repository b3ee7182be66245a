//! The one dispatcher of request codes, shared by the broker, the name server and the
//! controller: each process declares its request units (one per file: the codes, the access
//! rule and the handler), lists them with one line each, and gets from those declarations the
//! lookup by code (an array indexed by code, built once), the list of served codes, and RocketMQ's
//! answer to a code nobody serves.
//!
//! Owns: finding a code's unit, REQUEST_CODE_NOT_SUPPORTED's one copy, and the rule that a
//! oneway request is never answered (its work still runs). Must never: know what a code means,
//! or let two units claim one code (building the index panics, so a test catches it).

use petrel_protocol::RemotingCommand;
use petrel_protocol::codes::response_code as resp;

use crate::handler::{Reply, error};

/// A request unit as the dispatcher sees it: the code it answers.
pub trait Unit: 'static {
    /// The request code this unit serves.
    fn code(&self) -> i32;
}

/// A request unit as a process declares it in the request's own file: its code, its access rule
/// (the process's own kind) and its handler (the process's own signature).
pub struct Declared<R, H> {
    /// The request code it serves.
    pub code: i32,
    /// What the request touches, for the process's access checks.
    pub rule: R,
    /// The handler that answers the request.
    pub handle: H,
}

impl<R: 'static, H: 'static> Unit for Declared<R, H> {
    fn code(&self) -> i32 {
        self.code
    }
}

/// The code pages request codes live in: RocketMQ's remoting codes (below 4096), its POP and
/// newer codes (200 000 and up), and Petrel's own (300 000 and up).
const PAGES: [(i32, usize); 3] = [(0, 4096), (200_000, 512), (300_000, 256)];
const SLOTS: usize = PAGES[0].1 + PAGES[1].1 + PAGES[2].1;
/// A slot with no unit.
const EMPTY: u16 = u16::MAX;

/// The slot of `code`, if it lies in a page.
fn slot(code: i32) -> Option<usize> {
    let mut base = 0;
    for (start, len) in PAGES {
        if let Some(offset) = code.checked_sub(start).and_then(|o| usize::try_from(o).ok())
            && offset < len
        {
            return Some(base + offset);
        }
        base += len;
    }
    None
}

/// Request code → unit, indexed rather than searched.
pub struct Dispatcher<U: Unit> {
    units: Vec<&'static U>,
    slots: Box<[u16; SLOTS]>,
}

impl<U: Unit> Dispatcher<U> {
    /// Indexes the units of `files` (each file's declarations, one line per file).
    ///
    /// # Panics
    /// Two units with one code, a code outside the pages, or more units than slots: a
    /// declaration mistake, caught by the process's own tests.
    #[must_use]
    pub fn new(files: &[&'static [U]]) -> Dispatcher<U> {
        let mut units = Vec::new();
        let mut slots = Box::new([EMPTY; SLOTS]);
        for unit in files.iter().flat_map(|f| f.iter()) {
            let code = unit.code();
            let at = slot(code).unwrap_or_else(|| panic!("request code {code} is outside the dispatcher's pages"));
            assert!(slots[at] == EMPTY, "request code {code} is declared by two units");
            let index = u16::try_from(units.len()).expect("fewer units than u16::MAX");
            assert!(index != EMPTY, "fewer units than u16::MAX");
            slots[at] = index;
            units.push(unit);
        }
        Dispatcher { units, slots }
    }

    /// The unit serving `code`.
    #[must_use]
    pub fn unit(&self, code: i32) -> Option<&'static U> {
        let index = self.slots[slot(code)?];
        (index != EMPTY).then(|| self.units[usize::from(index)])
    }

    /// Every served code, in declaration order.
    pub fn served_codes(&self) -> impl Iterator<Item = i32> + '_ {
        self.units.iter().map(|u| u.code())
    }

    /// Every unit, in declaration order (the access map, the docs).
    #[must_use]
    pub fn units(&self) -> &[&'static U] {
        &self.units
    }

    /// `request`'s unit run by `run`, or RocketMQ's answer to a code nobody serves; a oneway
    /// request's answer is dropped, its work still done.
    pub fn dispatch(&self, request: RemotingCommand, run: impl FnOnce(&'static U, RemotingCommand) -> Reply) -> Reply {
        let oneway = request.is_oneway();
        let reply = match self.unit(request.code) {
            Some(unit) => run(unit, request),
            None => Reply::Now(not_supported(&request)),
        };
        if oneway { without_answer(reply) } else { reply }
    }
}

/// RocketMQ's answer to a request code nobody serves (`" request type N not supported"`, with
/// its leading space), the only copy.
#[must_use]
pub fn not_supported(request: &RemotingCommand) -> RemotingCommand {
    error(
        request,
        resp::REQUEST_CODE_NOT_SUPPORTED,
        format!(" request type {} not supported", request.code),
    )
}

/// A oneway request's reply: the work runs, nothing is sent.
#[must_use]
pub fn without_answer(reply: Reply) -> Reply {
    match reply {
        Reply::Later(work) => Reply::Later(Box::pin(async move {
            work.await;
            None
        })),
        Reply::Now(_) | Reply::None => Reply::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Echo(i32);
    impl Unit for Echo {
        fn code(&self) -> i32 {
            self.0
        }
    }

    const FIRST: &[Echo] = &[Echo(10), Echo(4095)];
    const SECOND: &[Echo] = &[Echo(200_050), Echo(300_005)];

    fn answer_code(reply: Reply) -> Option<i32> {
        match reply {
            Reply::Now(r) => Some(r.code),
            Reply::None => None,
            Reply::Later(_) => unreachable!("the tests answer now"),
        }
    }

    #[test]
    fn codes_in_every_page_find_their_unit_and_others_are_not_supported() {
        let d = Dispatcher::new(&[FIRST, SECOND]);
        assert_eq!(d.served_codes().collect::<Vec<_>>(), [10, 4095, 200_050, 300_005]);
        for code in [10, 4095, 200_050, 300_005] {
            assert_eq!(d.unit(code).map(Unit::code), Some(code));
        }
        for code in [-1, 11, 4096, 199_999, 200_562, 300_256, i32::MAX, i32::MIN] {
            assert!(d.unit(code).is_none(), "{code}");
        }
        let run = |u: &'static Echo, r: RemotingCommand| Reply::Now(error(&r, u.0, ""));
        assert_eq!(answer_code(d.dispatch(RemotingCommand::request(10, 7), run)), Some(10));
        let refused = d.dispatch(RemotingCommand::request(11, 7), run);
        let Reply::Now(r) = refused else { panic!("answered now") };
        assert_eq!(
            (r.code, r.remark.as_deref()),
            (resp::REQUEST_CODE_NOT_SUPPORTED, Some(" request type 11 not supported"))
        );
    }

    #[test]
    fn a_oneway_request_is_never_answered_but_its_work_runs() {
        let d = Dispatcher::new(&[FIRST]);
        let mut oneway = RemotingCommand::request(11, 7);
        oneway.mark_oneway();
        assert_eq!(
            answer_code(d.dispatch(oneway, |_, r| Reply::Now(r))),
            None,
            "not even NOT_SUPPORTED"
        );
        let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut oneway = RemotingCommand::request(10, 8);
        oneway.mark_oneway();
        let flag = ran.clone();
        let reply = d.dispatch(oneway, move |_, r| {
            Reply::Later(Box::pin(async move {
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
                Some(r)
            }))
        });
        let Reply::Later(work) = reply else { panic!("the work is kept") };
        let answered = futures_lite_block_on(work);
        assert!(answered.is_none() && ran.load(std::sync::atomic::Ordering::SeqCst));
    }

    #[test]
    #[should_panic(expected = "declared by two units")]
    fn two_units_with_one_code_do_not_build() {
        const TWICE: &[Echo] = &[Echo(10)];
        let _ = Dispatcher::new(&[FIRST, TWICE]);
    }

    /// Runs a future that needs no runtime to completion.
    fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().build().expect("runtime").block_on(f)
    }
}
