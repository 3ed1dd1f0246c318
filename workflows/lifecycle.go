package workflows

import (
	"fmt"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// acts is used only for its method values: the activity names and their
// signatures.
var acts *activities.Activities

// appendItem is one accepted Append waiting to be stored.
type appendItem struct {
	events []session.Event
	bytes  int
	done   bool
	err    error
	next   int64
}

// lifecycle is the state of one session workflow run: creation or resume,
// then the live phase, then disposal.
type lifecycle struct {
	ctx  workflow.Context // the root context
	dctx workflow.Context // disconnected from root cancellation (main coroutine)
	id   string
	set  settings

	source  string
	hooks   Hooks
	options *Options

	phase       Phase
	phaseChange change // the SessionPhase upserts

	groupCommitChange change // group commit
	localAppendChange change // the local append
	canEventsChange   change // the history-length continue-as-new
	ref               *wire.HandleRef
	handleOpen        bool
	header            session.Header
	inherited         int64
	nextSeq           int64
	firstLiveSeq      int64
	lastTurn          int64
	entries           []LifecycleEntry
	compErrs          []CompensationError
	comps             []compensation

	outstanding []workflow.Future
	stepCancel  workflow.CancelFunc
	abortErr    error
	cancelSeen  bool
	failure     error
	// failureAnswered says WaitReady may return the failure: at once in
	// runs recorded before the failAfterRollback change, after the
	// rollback since.
	failureAnswered bool
	ready           *SessionInfo

	nonce   string
	handleN int

	// live phase
	pending       []*appendItem
	pendingEvents int64
	timerRunning  bool
	flushDue      bool
	disposeWanted bool
	disposeDone   bool
	disposeErr    error
	// decodedAppends holds the Append requests the validator decoded, by
	// update id, until their handler takes them.
	decodedAppends map[string]AppendRequest

	// agent is the agent loop (turn.go).
	agent agentLoop
}

func newLifecycle(ctx workflow.Context, id, source string, hooks Hooks, set settings) *lifecycle {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	return &lifecycle{ctx: ctx, dctx: dctx, id: id, source: source, hooks: hooks, set: set, phase: PhasePreparing}
}

// register installs the query and update handlers shared by every phase.
func (l *lifecycle) register() error {
	for _, name := range []string{QueryDescribe, LegacyQueryDescribe} {
		if err := workflow.SetQueryHandler(l.ctx, name, l.describe); err != nil {
			return err
		}
	}
	if err := workflow.SetUpdateHandler(l.ctx, UpdateWaitReady, l.waitReady); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(l.ctx, UpdateAppend, l.handleAppendPayload,
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in converter.RawValue) error {
			return boundRejection(l.validateAppendPayload(ctx, in))
		}}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(l.ctx, UpdateDispose, l.handleDispose,
		workflow.UpdateHandlerOptions{Validator: l.validateDispose}); err != nil {
		return err
	}
	if err := l.registerAgent(); err != nil {
		return err
	}
	l.watch()
	return nil
}

func (l *lifecycle) describe() (Description, error) {
	d := Description{
		SessionID:          l.id,
		Phase:              l.phase,
		Source:             l.source,
		HandleOpen:         l.handleOpen,
		NextSeq:            l.nextSeq,
		PendingEvents:      l.pendingEvents,
		Lifecycle:          append([]LifecycleEntry{}, l.entries...),
		CompensationErrors: append([]CompensationError{}, l.compErrs...),
	}
	if l.ref != nil {
		ref := *l.ref
		d.Handle = &ref
	}
	if l.failure != nil {
		fi := errorInfo(l.failure)
		d.Failure = &fi
	}
	return d, nil
}

func (l *lifecycle) waitReady(ctx workflow.Context) (SessionInfo, error) {
	hctx, _ := workflow.NewDisconnectedContext(ctx)
	if err := workflow.Await(hctx, func() bool { return l.ready != nil || l.failureAnswered }); err != nil {
		return SessionInfo{}, err
	}
	if l.ready != nil {
		return *l.ready, nil
	}
	return SessionInfo{}, l.failure
}

// batchBytes is the encoded size of a batch.
func batchBytes(events []session.Event) (int, error) {
	n := 0
	for _, e := range events {
		b, err := e.MarshalJSON()
		if err != nil {
			return 0, err
		}
		n += len(b) + 1
	}
	return n, nil
}

// checkBatch validates a bounded batch that must continue at next.
func (l *lifecycle) checkBatch(what string, events []session.Event, next int64) error {
	if _, err := session.SnapshotBatch(events); err != nil {
		return invalidArgument(err.Error())
	}
	n, err := batchBytes(events)
	if err != nil {
		return invalidArgument(err.Error())
	}
	if n > l.set.maxBatchBytes {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s of %d bytes exceeds the batch limit of %d bytes", what, n, l.set.maxBatchBytes), ErrTypeBatchTooLarge, nil)
	}
	if err := session.CheckContiguous(l.id, next, events); err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), string(wire.CodeSeqMismatch), nil)
	}
	return nil
}

// setupRulesChange names the versioned change that refuses, before the
// commit hook, setup events breaking a rule the store applies at append.
// Earlier runs failed when the store refused them at the commit point.
const setupRulesChange = "setup-append-rules"

// initialize runs LIFECYCLE.md §6 for create and resume: setup, commit,
// the commit point (store) and publication.
// eventCount is the session's length including the unstored suffix;
// storeSuffix stores that suffix plus the setup events as one batch.
func (l *lifecycle) initialize(eventCount int64, storeSuffix func(extra []session.Event) error) error {
	l.setPhase(PhaseSetup)
	in := SetupInput{SessionID: l.id, Source: l.source, Handle: *l.ref, Header: l.header, EventCount: eventCount, StoredCount: l.nextSeq}
	var setup SetupResult
	if l.hooks.SetupActivity != "" {
		err := l.race(func(ctx workflow.Context) workflow.Future {
			return workflow.ExecuteActivity(l.hookCtx(ctx), l.hooks.SetupActivity, in)
		}, &setup)
		if err != nil {
			return err
		}
		if len(setup.Events) > 0 {
			if err := l.checkBatch("setup events", setup.Events, eventCount); err != nil {
				return err
			}
			if err := session.CheckAppendable(l.header, eventCount, setup.Events); err != nil {
				// Versioned only where it matters: setup events the store
				// would refuse now fail here, before the commit hook.
				if workflow.GetVersion(l.dctx, setupRulesChange, workflow.DefaultVersion, 1) >= 1 {
					return invalidArgument("setup events: " + err.Error())
				}
			}
		}
	}
	if err := l.checkAbort(); err != nil {
		return err
	}
	if l.hooks.CommitActivity != "" {
		err := unwrapActivity(workflow.ExecuteActivity(l.hookCtx(l.dctx), l.hooks.CommitActivity, in).Get(l.dctx, nil))
		if err != nil {
			return err
		}
	}
	if err := l.checkAbort(); err != nil {
		return err
	}
	l.setPhase(PhaseCommitting)
	if err := storeSuffix(setup.Events); err != nil {
		return err
	}
	return l.publishAll()
}

// publishAll publishes the lifecycle entries with the checks of LIFECYCLE.md §6
// step 4.
func (l *lifecycle) publishAll() error {
	if err := l.checkAbort(); err != nil {
		return err
	}
	if err := l.publish(LifecycleEntry{Type: EntrySessionCreated}); err != nil {
		return err
	}
	if err := l.checkAbort(); err != nil {
		return err
	}
	if err := l.publish(LifecycleEntry{Type: EntryAgentCreated}); err != nil {
		return err
	}
	if err := l.publish(LifecycleEntry{Type: EntrySessionStart, Source: l.source}); err != nil {
		return err
	}
	return l.checkAbort()
}

func (l *lifecycle) publish(e LifecycleEntry) error {
	if l.hooks.PublishActivity != "" {
		err := workflow.ExecuteActivity(l.hookCtx(l.dctx), l.hooks.PublishActivity, PublishInput{SessionID: l.id, Entry: e}).Get(l.dctx, nil)
		if err != nil {
			return unwrapActivity(err)
		}
	}
	l.entries = append(l.entries, e)
	return nil
}

// storeBatch appends events through the handle (not raced: a stored
// suffix is legitimate history).
func (l *lifecycle) storeBatch(events []session.Event) error {
	if len(events) == 0 {
		return nil
	}
	var res activities.AppendResult
	err := workflow.ExecuteActivity(l.storeCtx(l.dctx), acts.AppendBatch,
		activities.AppendBatchInput{Ref: *l.ref, Events: events}).Get(l.dctx, &res)
	if err != nil {
		return unwrapActivity(err)
	}
	l.nextSeq = res.NextSeq
	return nil
}

// start runs prepare, a create's or resume's work before the live phase,
// then the live phase. A failure of prepare is returned unchanged after
// the rollback (fail).
func (l *lifecycle) start(prepare func() error) (DisposeResult, error) {
	if err := prepare(); err != nil {
		return DisposeResult{}, l.fail(err)
	}
	return l.goLive()
}

// goLive enters the live phase: the close compensation now belongs to
// disposal, WaitReady returns, and a parent SessionLoop is told.
func (l *lifecycle) goLive() (DisposeResult, error) {
	l.comps = nil
	l.setPhase(PhaseLive)
	l.ready = l.sessionInfo()
	info := workflow.GetInfo(l.ctx)
	if p := info.ParentWorkflowExecution; p != nil {
		notice := ReadyNotice{SessionID: l.id, RunID: info.WorkflowExecution.RunID}
		workflow.Go(l.dctx, func(gctx workflow.Context) {
			name := sentName(gctx, SignalSessionReady, LegacySignalSessionReady)
			_ = workflow.SignalExternalWorkflow(gctx, p.ID, "", name, notice).Get(gctx, nil)
		})
	}
	return l.runLive()
}

// sessionInfo is what WaitReady answers once the session is live.
func (l *lifecycle) sessionInfo() *SessionInfo {
	info := workflow.GetInfo(l.ctx)
	return &SessionInfo{
		SessionID:           l.id,
		WorkflowID:          info.WorkflowExecution.ID,
		RunID:               info.WorkflowExecution.RunID,
		Handle:              *l.ref,
		Header:              l.header,
		InheritedEventCount: l.inherited,
		NextSeq:             l.nextSeq,
		FirstLiveSeq:        l.firstLiveSeq,
		LastTurn:            l.lastTurn,
		Source:              l.source,
	}
}
