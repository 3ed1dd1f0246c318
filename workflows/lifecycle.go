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

// env is what every owner of a run's state reads: the run's contexts, the
// session, its settings, options and hooks, and the run's version gates.
// It is set when the run starts and its fields are not written after
// (gates, a map, is written by its own method only).
type env struct {
	ctx     workflow.Context // the root context
	dctx    workflow.Context // disconnected from root cancellation (main coroutine)
	id      string
	source  string
	hooks   wire.Hooks
	options *wire.Options
	set     settings
	gates   gates
	// ui is what the run shows in the Temporal UI (uimeta.go).
	ui *uiState
}

// lifecycle is one session workflow run: creation or resume, then the
// live phase, then disposal. It composes the owners of the run's state and
// writes none of their fields: each owner writes its own, through its
// methods (the rule of doc.go, State).
type lifecycle struct {
	*env
	// log is the stored log: the write handle and the cursor (storedlog.go).
	log *storedLog
	// phase is the lifecycle phase, its entries and its answers (phase.go).
	phase *phaseState
	// saga is the compensation stack of creation and resume (saga.go).
	saga *saga
	// aborts is what interrupts the run before it is live (abort.go).
	aborts *abortGuard
	// appends is the queue of accepted appends (appends.go).
	appends *appendQueue
	// agent is the agent loop: its inputs, turns and waits (turn.go).
	agent *agentLoop
}

func newLifecycle(ctx workflow.Context, id, source string, hooks wire.Hooks, options *wire.Options, set settings) *lifecycle {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	e := &env{ctx: ctx, dctx: dctx, id: id, source: source, hooks: hooks, options: options, set: set, gates: gates{}}
	log := &storedLog{env: e}
	phase := &phaseState{env: e, log: log, phase: wire.PhasePreparing}
	appends := &appendQueue{env: e, log: log}
	l := &lifecycle{
		env:     e,
		log:     log,
		phase:   phase,
		saga:    &saga{env: e},
		appends: appends,
		agent:   &agentLoop{env: e, log: log, phase: phase, appends: appends},
	}
	l.aborts = &abortGuard{env: e, phase: phase, dispose: l.requestDispose}
	e.ui = &uiState{render: l.currentDetails}
	l.agent.canDue = l.canDue
	return l
}

// register installs the query and update handlers shared by every phase.
func (l *lifecycle) register() error {
	for _, name := range []string{wire.QueryDescribe, wire.LegacyQueryDescribe} {
		if err := workflow.SetQueryHandler(l.ctx, name, l.describe); err != nil {
			return err
		}
	}
	if err := workflow.SetUpdateHandler(l.ctx, wire.UpdateWaitReady, l.phase.waitReady); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(l.ctx, wire.UpdateAppend, l.handleAppendPayload,
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in converter.RawValue) error {
			return boundRejection(l.validateAppendPayload(ctx, in))
		}}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(l.ctx, wire.UpdateDispose, l.handleDispose,
		workflow.UpdateHandlerOptions{Validator: l.phase.validateDispose}); err != nil {
		return err
	}
	if err := l.agent.register(); err != nil {
		return err
	}
	l.aborts.watch()
	return nil
}

func (l *lifecycle) describe() (wire.Description, error) {
	d := wire.Description{
		SessionID:          l.id,
		Phase:              l.phase.phase,
		Source:             l.source,
		HandleOpen:         l.log.handleOpen,
		NextSeq:            l.log.nextSeq,
		PendingEvents:      l.appends.pendingEvents,
		Lifecycle:          append([]wire.LifecycleEntry{}, l.phase.entries...),
		CompensationErrors: append([]wire.CompensationError{}, l.saga.errs...),
	}
	if l.log.ref != nil {
		ref := *l.log.ref
		d.Handle = &ref
	}
	if l.phase.failure != nil {
		fi := errorInfo(l.phase.failure)
		d.Failure = &fi
	}
	return d, nil
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
func (e *env) checkBatch(what string, events []session.Event, next int64) error {
	if _, err := session.SnapshotBatch(events); err != nil {
		return invalidArgument(err.Error())
	}
	n, err := batchBytes(events)
	if err != nil {
		return invalidArgument(err.Error())
	}
	if n > e.set.maxBatchBytes {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s of %d bytes exceeds the batch limit of %d bytes", what, n, e.set.maxBatchBytes), wire.ErrTypeBatchTooLarge, nil)
	}
	if err := session.CheckContiguous(e.id, next, events); err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), string(wire.CodeSeqMismatch), nil)
	}
	return nil
}

// storesOnOwnQueue reports whether the store activities run on the
// workflow's own task queue, whose workers register them: the condition of
// every local store (D43, D45).
func (e *env) storesOnOwnQueue() bool {
	return e.set.taskQueue == "" || e.set.taskQueue == workflow.GetInfo(e.dctx).TaskQueueName
}

// owner is the run as the store's lease owner.
func (e *env) owner() wire.Owner {
	info := workflow.GetInfo(e.ctx)
	return wire.Owner{WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID}
}

// start runs prepare, a create's or resume's work before the live phase,
// then the live phase. A failure of prepare is returned unchanged after
// the rollback (fail).
func (l *lifecycle) start(prepare func() error) (wire.DisposeResult, error) {
	if err := prepare(); err != nil {
		return wire.DisposeResult{}, l.fail(err)
	}
	return l.goLive()
}

// goLive enters the live phase: the close compensation now belongs to
// disposal, WaitReady returns, and a parent SessionLoop is told.
func (l *lifecycle) goLive() (wire.DisposeResult, error) {
	l.saga.clear()
	l.phase.goLive(l.sessionInfo())
	info := workflow.GetInfo(l.ctx)
	if p := info.ParentWorkflowExecution; p != nil && l.agent.delegated == nil {
		notice := wire.ReadyNotice{SessionID: l.id, RunID: info.WorkflowExecution.RunID}
		workflow.Go(l.dctx, func(gctx workflow.Context) {
			name := sentName(gctx, wire.SignalSessionReady, wire.LegacySignalSessionReady)
			_ = workflow.SignalExternalWorkflow(gctx, p.ID, "", name, notice).Get(gctx, nil)
		})
	}
	return l.runLive()
}

// sessionInfo is what WaitReady answers once the session is live.
func (l *lifecycle) sessionInfo() *wire.SessionInfo {
	info := workflow.GetInfo(l.ctx)
	return &wire.SessionInfo{
		SessionID:           l.id,
		WorkflowID:          info.WorkflowExecution.ID,
		RunID:               info.WorkflowExecution.RunID,
		Handle:              *l.log.ref,
		Header:              l.log.header,
		InheritedEventCount: l.log.inherited,
		NextSeq:             l.log.nextSeq,
		FirstLiveSeq:        l.log.firstLiveSeq,
		LastTurn:            l.log.lastTurn,
		Source:              l.source,
	}
}

// fail records the failure, unwinds the compensation stack, waits for
// abandoned steps and running handlers, and returns err unchanged. WaitReady
// returns the failure once the rollback is done, in the workflow task that
// completes the run: a caller who sees it can start a new run of the id at
// once (runs recorded before the failAfterRollback change answered first).
func (l *lifecycle) fail(err error) error {
	answerLate := workflow.GetVersion(l.dctx, failAfterRollbackChange, workflow.DefaultVersion, 1) >= 1
	l.phase.failed(err, !answerLate)
	workflow.GetLogger(l.ctx).Info("session lifecycle failed", "session", l.id, "error", errorMessage(err))
	l.saga.unwind()
	l.aborts.awaitAbandoned()
	l.phase.enter(wire.PhaseClosed)
	l.phase.rolledBack()
	awaitHandlers(l.dctx)
	return err
}

// awaitHandlers waits until every update handler of the run has finished.
func awaitHandlers(dctx workflow.Context) {
	_ = workflow.Await(dctx, func() bool { return workflow.AllHandlersFinished(dctx) })
}

// chooseHandle picks the write handle id before the create or open
// activity runs and pushes its close: a compensation closes the handle id
// whatever happened to the activity.
func (l *lifecycle) chooseHandle() wire.HandleRef {
	ref := l.log.choose()
	l.saga.push("close-handle", func(ctx workflow.Context) error {
		err := l.log.closeHandle(ctx)
		l.log.closed()
		return err
	})
	return ref
}

// requestDispose asks a live session to dispose: a running turn ends
// first, aborted with cause "disposed" (a one-shot child cancelled by its
// parent: "parent").
func (l *lifecycle) requestDispose() {
	if l.phase.requestDispose() {
		cause := wire.CauseDisposed
		if l.agent.delegated != nil && l.ctx.Err() != nil {
			cause = wire.CauseParent
		}
		l.agent.cancelTurn(cause)
	}
}
