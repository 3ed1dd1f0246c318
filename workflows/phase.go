package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/wire"
)

// phaseState is the lifecycle phase of the run (LIFECYCLE.md §3), the
// lifecycle entries published, and what WaitReady and Dispose answer: the
// session once live, the failure of its creation or resume, the outcome
// of its disposal. Other owners read its fields; only its methods write
// them.
type phaseState struct {
	*env
	// log is read for the header's cwd (the search attributes).
	log     *storedLog
	phase   wire.Phase
	entries []wire.LifecycleEntry
	// ready is the session WaitReady answers once live.
	ready *wire.SessionInfo
	// failure is the failure of creation or resume; failureAnswered says
	// WaitReady may return it: at once in runs recorded before the
	// failAfterRollback change, after the rollback since.
	failure         error
	failureAnswered bool
	// disposeWanted is set once disposal is asked of a live session;
	// disposeDone and disposeErr are its outcome.
	disposeWanted bool
	disposeDone   bool
	disposeErr    error
}

// enter moves the lifecycle to phase p and, when the request asked for
// search attributes, records it (with the session id and cwd). The upserts
// are gated by GetVersion so runs recorded before them replay unchanged.
func (s *phaseState) enter(p wire.Phase) {
	s.phase = p
	s.showDetails()
	if s.options == nil || !s.options.SearchAttributes {
		return
	}
	if !s.gates.taken(s.dctx, phaseSearchAttributeChange) {
		return
	}
	updates := []temporal.SearchAttributeUpdate{
		SearchAttributeSessionID.ValueSet(s.id),
		SearchAttributeSessionPhase.ValueSet(string(p)),
	}
	if s.log.header.Cwd != "" {
		updates = append(updates, SearchAttributeSessionCwd.ValueSet(s.log.header.Cwd))
	}
	if err := workflow.UpsertTypedSearchAttributes(s.dctx, updates...); err != nil {
		workflow.GetLogger(s.dctx).Warn("search attribute upsert failed", "session", s.id, "phase", p, "error", err)
	}
}

// preLive reports whether the lifecycle has not published yet.
func (s *phaseState) preLive() bool {
	return s.phase == wire.PhasePreparing || s.phase == wire.PhaseSetup || s.phase == wire.PhaseCommitting
}

// live reports whether the session is live and no disposal was asked.
func (s *phaseState) live() bool {
	return s.phase == wire.PhaseLive && !s.disposeWanted
}

// admit refuses work outside the live phase (notLive), and accepts it
// while live.
func (s *phaseState) admit() error {
	if !s.live() {
		return s.notLive()
	}
	return nil
}

// notLive refuses work outside the live phase: before publication the
// session is not live yet; once disposal began the lifecycle is disposed
// (LIFECYCLE.md §3).
func (s *phaseState) notLive() error {
	if s.disposeWanted || s.phase == wire.PhaseDisposing || s.phase == wire.PhaseClosed {
		return LifecycleDisposedError(s.id)
	}
	return notLiveError(s.id, s.phase)
}

// LifecycleDisposedError is the error of work refused by a disposed
// lifecycle.
func LifecycleDisposedError(id string) error {
	return temporal.NewNonRetryableApplicationError("agent "+quoteID(id)+" lifecycle disposed", wire.ErrTypeLifecycleDisposed, nil)
}

// published records a published lifecycle entry.
func (s *phaseState) published(e wire.LifecycleEntry) {
	s.entries = append(s.entries, e)
}

// goLive enters the live phase; WaitReady answers info.
func (s *phaseState) goLive(info *wire.SessionInfo) {
	s.enter(wire.PhaseLive)
	s.ready = info
}

// restore takes the entries of the run before continue-as-new.
func (s *phaseState) restore(entries []wire.LifecycleEntry) {
	s.entries = append([]wire.LifecycleEntry{}, entries...)
}

// failed records the failure of creation or resume; answerNow lets
// WaitReady return it before the rollback (runs recorded before the
// failAfterRollback change).
func (s *phaseState) failed(err error, answerNow bool) {
	s.failure = err
	s.failureAnswered = answerNow
}

// rolledBack lets WaitReady return the failure: the rollback is done.
func (s *phaseState) rolledBack() {
	s.failureAnswered = true
}

// waitReady is the WaitReady handler: the session once live, or the
// failure of its creation or resume.
func (s *phaseState) waitReady(ctx workflow.Context) (wire.SessionInfo, error) {
	hctx, _ := workflow.NewDisconnectedContext(ctx)
	if err := workflow.Await(hctx, func() bool { return s.ready != nil || s.failureAnswered }); err != nil {
		return wire.SessionInfo{}, err
	}
	if s.ready != nil {
		return *s.ready, nil
	}
	return wire.SessionInfo{}, s.failure
}

// requestDispose asks a live session to dispose, and reports whether it
// was live.
func (s *phaseState) requestDispose() bool {
	if s.phase != wire.PhaseLive {
		return false
	}
	s.disposeWanted = true
	return true
}

// disposed records the outcome of the disposal.
func (s *phaseState) disposed(err error) {
	s.disposeErr = err
	s.disposeDone = true
}

// validateDispose accepts Dispose once the session is live, and after a
// disposal (whose outcome it then returns); a session that failed before
// going live has nothing to dispose.
func (s *phaseState) validateDispose() error {
	if s.phase == wire.PhaseLive || s.phase == wire.PhaseDisposing || s.disposeDone {
		return nil
	}
	return notLiveError(s.id, s.phase)
}
