//! Plan mode as the model enters and leaves it (EnterPlanMode, ExitPlanMode): the switch takes
//! effect from the next model turn of the run that made it (the calls of one turn are decided
//! together, under the permission the turn began with) and for the session's next runs, as if
//! `setPermissionMode` had been called. A sub-agent's switch is its own run's only.

use std::sync::{Arc, Mutex};

use super::permission::Permission;
use crate::builtins::ModeChange;
use crate::sync::lock;

/// What a switch leads to from `current`.
pub(crate) fn switched(current: Option<Permission>, change: &ModeChange) -> Option<Permission> {
    match change {
        ModeChange::EnterPlan => Some(Permission::entering_plan(current)),
        ModeChange::LeavePlan { target } => Permission::leaving_plan(current, target.as_deref()),
    }
}

/// A session's permission as its runs switched it, for the next run to start with;
/// `setPermissionMode` replaces it.
#[derive(Default)]
pub struct Switched(Mutex<Option<Option<Permission>>>);

impl Switched {
    /// The permission the last switch left, once: the session keeps it in its settings.
    pub(crate) fn take(&self) -> Option<Option<Permission>> {
        lock(&self.0).take()
    }

    fn set(&self, permission: Option<Permission>) {
        *lock(&self.0) = Some(permission);
    }
}

/// The permission a run decides its turns' calls with: the session's when the run started, until
/// a built-in switches plan mode.
pub(crate) struct RunPermission {
    current: Mutex<Option<Permission>>,
    /// Where a switch goes for the session's next runs (a sub-agent's run has none).
    session: Option<Arc<Switched>>,
}

impl RunPermission {
    pub fn new(start: Option<Permission>, session: Option<Arc<Switched>>) -> Self {
        RunPermission {
            current: Mutex::new(start),
            session,
        }
    }

    pub fn get(&self) -> Option<Permission> {
        *lock(&self.current)
    }

    pub fn switch(&self, change: &ModeChange) {
        let mut current = lock(&self.current);
        *current = switched(*current, change);
        if let Some(session) = &self.session {
            session.set(*current);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::permission::Preset;

    #[test]
    fn a_switch_holds_for_the_run_and_reaches_the_session_once() {
        let session = Arc::new(Switched::default());
        let run = RunPermission::new(None, Some(session.clone()));
        run.switch(&ModeChange::EnterPlan);
        assert_eq!(run.get(), Some(Permission::PlanOver(None)));
        assert_eq!(session.take(), Some(Some(Permission::PlanOver(None))));
        assert_eq!(session.take(), None);
        run.switch(&ModeChange::LeavePlan { target: None });
        assert_eq!(run.get(), None);
        assert_eq!(session.take(), Some(None));
        let child = RunPermission::new(Some(Permission::Preset(Preset::Default)), None);
        child.switch(&ModeChange::EnterPlan);
        assert_eq!(child.get(), Some(Permission::PlanOver(Some(Preset::Default))));
    }
}
