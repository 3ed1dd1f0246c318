package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// ResumeSession is the resume of LIFECYCLE.md §5 as a workflow, run with workflow
// id session/<id>: it takes write ownership first (a handle id chosen here),
// scans the stored log (a bounded description of it), stores the crash closers and
// the end-seed marker before setup, then runs setup, commit and
// publication like CreateSession with source "resume" and stays live until
// disposal. Any failure before live closes the handle (the repair stays
// stored), publishes nothing and is returned unchanged. A request without a
// model route takes the one the log records (storedRoute).
func ResumeSession(ctx workflow.Context, req wire.ResumeSessionRequest) (wire.DisposeResult, error) {
	set, optErr := resolveOptions(req.Options)
	l := newLifecycle(ctx, req.ResumeSessionID, wire.SourceResume, req.Hooks, req.Options, set)
	if err := l.register(); err != nil {
		return wire.DisposeResult{}, err
	}
	return l.start(func() error {
		if optErr != nil {
			return optErr
		}
		return l.prepareResume(ctx, req)
	})
}

// prepareResume is ResumeSession before the live phase; start rolls back
// every failure it returns.
func (l *lifecycle) prepareResume(ctx workflow.Context, req wire.ResumeSessionRequest) error {
	if err := wire.ValidateID(req.ResumeSessionID); err != nil {
		return invalidArgument(err.Error())
	}
	if err := checkIdentity(ctx, req.ResumeSessionID); err != nil {
		return err
	}
	if err := l.aborts.check(); err != nil {
		return err
	}
	// Step 3: write ownership first.
	ref := l.chooseHandle()
	var hi activities.HandleInfo
	open := func(c workflow.Context) workflow.Future {
		return workflow.ExecuteActivity(l.act(l.set.storeCtx(c), "open the session's write handle"), acts.OpenHandle, activities.OpenHandleInput{
			SessionID: l.id,
			Access:    wire.AccessWrite,
			HandleID:  ref.HandleID,
			Owner:     l.owner(),
		})
	}
	err := l.aborts.race(open, &hi)
	if err != nil && errorType(err) == string(wire.CodeAlreadyOwned) && req.ForfeitsDeadOwner() {
		err = l.forfeitDeadOwner(err, open, &hi)
	}
	if err != nil {
		return err
	}
	l.log.opened(hi.Header, hi.InheritedEventCount, hi.NextSeq)
	// Step 4: scan the validated log (a bounded description of it). A
	// failure here fails the resume; the scan itself is not kept, because
	// Repair below returns the one after the closers are stored.
	scanLog := sentName(ctx, wire.ScanLogName, wire.LegacyReadSummaryName)
	err = l.aborts.race(func(c workflow.Context) workflow.Future {
		return workflow.ExecuteActivity(l.act(l.set.storeCtx(c), "scan the stored log"), scanLog, activities.HandleInput{Ref: ref})
	}, nil)
	if err != nil {
		return err
	}
	if err := l.aborts.check(); err != nil {
		return err
	}
	// Steps 5-7: closers and marker, stored now, as one batch.
	var rep activities.RepairResult
	repair := sentName(ctx, wire.RepairName, wire.LegacyRepairAndMarkName)
	err = workflow.ExecuteActivity(l.act(l.set.storeCtx(l.dctx), "crash repair: close an interrupted turn, store the end-seed marker"), repair, activities.RepairInput{
		Ref: ref,
		Now: workflow.Now(ctx).UnixMilli(),
	}).Get(l.dctx, &rep)
	if err != nil {
		return unwrapActivity(err)
	}
	firstLive := rep.Scan.NextSeq
	if rep.MarkerSeq >= 0 {
		firstLive = rep.MarkerSeq
	}
	l.log.repaired(rep.Scan.Header, rep.Scan.InheritedEventCount, rep.Scan.NextSeq, rep.Scan.LastTurn, firstLive)
	// The agent's inputs still pending in the log wait for a waking input.
	l.agent.inbox.restoreStored(rep.Scan.Inbox)
	// The log's latest ended turn (the one the repair closed as
	// interrupted) is the first recent turn: a wait for it is answered.
	// Workflow state only: no command depends on it.
	l.agent.seedRecent(rep.Scan.LastTurnInfo)
	// Step 9: owner and loop still active; then agent options.
	if err := l.aborts.check(); err != nil {
		return err
	}
	if err := validateAgentOptions(req.AgentOptions); err != nil {
		return err
	}
	if err := l.agent.setOptions(storedRoute(req.AgentOptions, rep.Scan.Route), rep.Scan.Permissions, hi.PermissionDefaults); err != nil {
		return err
	}
	l.saga.pushDisposeHook()
	return l.initialize(l.log.nextSeq, func(extra []session.Event) error {
		l.log.noteTurn(session.LastTurn(extra))
		return l.log.storeBatch(extra)
	})
}

// storedRoute returns the agent options of a resume: the caller's, with
// the route the log records (its last request/context) when they name no
// provider and no model. The caller's limits stay. The route comes from the
// Repair activity's recorded result, so a replay takes the same one; a
// result recorded before the field existed has none, and the options stay
// the caller's, as they were.
func storedRoute(o *wire.AgentOptions, r *activities.Route) *wire.AgentOptions {
	if r == nil || (o != nil && (o.Provider != "" || o.Model != "")) {
		return o
	}
	var out wire.AgentOptions
	if o != nil {
		out = *o
	}
	out.Provider, out.Model = r.Provider, r.Model
	return &out
}
