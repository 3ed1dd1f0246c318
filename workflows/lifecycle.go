package workflows

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
)

// acts is used only for its method values: the activity names and their
// signatures.
var acts *activities.Activities

// Defaults of Options.
const (
	DefaultAppendWindow     = 200 * time.Millisecond
	DefaultMaxBatchBytes    = 256 << 10
	MaxMaxBatchBytes        = 1 << 20
	DefaultActivityTimeout  = 10 * time.Minute
	DefaultHeartbeatTimeout = 10 * time.Second
	DefaultMaxAttempts      = 10
)

// settings are Options with the defaults applied.
type settings struct {
	window        time.Duration
	maxBatchBytes int
	taskQueue     string
	hookTaskQueue string
	timeout       time.Duration
	heartbeat     time.Duration
	attempts      int32
}

func resolveOptions(o *Options) (settings, error) {
	s := settings{
		window:        DefaultAppendWindow,
		maxBatchBytes: DefaultMaxBatchBytes,
		timeout:       DefaultActivityTimeout,
		heartbeat:     DefaultHeartbeatTimeout,
		attempts:      DefaultMaxAttempts,
	}
	if o == nil {
		return s, nil
	}
	switch {
	case o.AppendWindowMs < 0, o.MaxBatchBytes < 0, o.ActivityTimeoutMs < 0, o.HeartbeatTimeoutMs < 0, o.MaxAttempts < 0:
		return s, invalidArgument("session options must not be negative")
	case o.MaxBatchBytes > MaxMaxBatchBytes:
		return s, invalidArgument(fmt.Sprintf("maxBatchBytes must be at most %d", MaxMaxBatchBytes))
	}
	if o.AppendWindowMs > 0 {
		s.window = time.Duration(o.AppendWindowMs) * time.Millisecond
	}
	if o.MaxBatchBytes > 0 {
		s.maxBatchBytes = o.MaxBatchBytes
	}
	if o.ActivityTimeoutMs > 0 {
		s.timeout = time.Duration(o.ActivityTimeoutMs) * time.Millisecond
	}
	if o.HeartbeatTimeoutMs > 0 {
		s.heartbeat = time.Duration(o.HeartbeatTimeoutMs) * time.Millisecond
	}
	if o.MaxAttempts > 0 {
		s.attempts = o.MaxAttempts
	}
	s.taskQueue, s.hookTaskQueue = o.TaskQueue, o.HookTaskQueue
	return s, nil
}

// compensation is one undo step of the rollback stack.
type compensation struct {
	step string
	fn   func(ctx workflow.Context) error
}

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

	phase          Phase
	phaseVersioned bool             // GetVersion of the SessionPhase upserts was taken
	phaseVersion   workflow.Version // its result

	groupCommitVersioned bool             // GetVersion of group commit was taken
	groupCommitVersion   workflow.Version // its result
	ref                  *jsonl.HandleRef
	handleOpen           bool
	header               session.Header
	inherited            int64
	nextSeq              int64
	firstLive            int64
	lastTurn             int64
	entries              []LifecycleEntry
	compErrs             []CompensationError
	comps                []compensation

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
}

func newLifecycle(ctx workflow.Context, id, source string, hooks Hooks, set settings) *lifecycle {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	return &lifecycle{ctx: ctx, dctx: dctx, id: id, source: source, hooks: hooks, set: set, phase: PhasePreparing}
}

// invalidArgument is a non-retryable InvalidArgument application error.
func invalidArgument(msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, ErrTypeInvalidArgument, nil)
}

// quoteID writes an id between double quotes verbatim, as the reference
// texts do.
func quoteID(id string) string { return `"` + id + `"` }

// CreationAbortedError is the normalized error of an abort whose reason is
// not an error (SPEC 7.2); the raw reason is its detail.
func CreationAbortedError(id, reason string) error {
	return temporal.NewNonRetryableApplicationError("agent "+quoteID(id)+" creation aborted", ErrTypeAbort, nil, reason)
}

// OwnerDisposedError is the error of an owner that went away during setup.
func OwnerDisposedError(id string) error {
	return temporal.NewNonRetryableApplicationError("agent "+quoteID(id)+" setup aborted: owner disposed during setup", ErrTypeOwnerDisposed, nil)
}

// LoopInactiveText is the error text of work refused by an inactive loop.
const LoopInactiveText = "agent loop is not active"

// LoopInactiveError is the error of a session aborted by loop deactivation.
func LoopInactiveError() error {
	return temporal.NewNonRetryableApplicationError(LoopInactiveText, ErrTypeLoopInactive, nil)
}

// AlreadyExistsError is the error of a duplicate live session id.
func AlreadyExistsError(id string) error {
	return temporal.NewNonRetryableApplicationError("session "+quoteID(id)+" already exists", ErrTypeAlreadyExists, nil)
}

// MaxTokensText is the error text of an invalid maxTokens (SPEC 7.3 step 3).
const MaxTokensText = "agent maxTokens must be a positive safe integer"

func (l *lifecycle) normalizeAbort(a AbortRequest) error {
	if a.IsError {
		typ := a.Type
		if typ == "" {
			typ = ErrTypeError
		}
		return temporal.NewNonRetryableApplicationError(a.Reason, typ, nil)
	}
	return CreationAbortedError(l.id, a.Reason)
}

// preLive reports whether the lifecycle has not published yet.
func (l *lifecycle) preLive() bool {
	return l.phase == PhasePreparing || l.phase == PhaseSetup || l.phase == PhaseCommitting
}

// setAbort records the first abort and cancels the step in flight.
func (l *lifecycle) setAbort(err error) {
	if l.abortErr != nil || !l.preLive() {
		return
	}
	l.abortErr = err
	if l.stepCancel != nil {
		l.stepCancel()
	}
}

// onCancel handles the root context's cancellation: before live it aborts
// (with a reason signalled earlier, else `creation aborted`); while live it
// disposes.
func (l *lifecycle) onCancel(abortCh, ownerCh workflow.ReceiveChannel) {
	if l.cancelSeen {
		return
	}
	l.cancelSeen = true
	l.drainSignals(abortCh, ownerCh)
	if l.preLive() {
		l.setAbort(CreationAbortedError(l.id, ""))
		return
	}
	l.requestDispose()
}

func (l *lifecycle) drainSignals(abortCh, ownerCh workflow.ReceiveChannel) {
	for {
		var a AbortRequest
		if !abortCh.ReceiveAsync(&a) {
			break
		}
		l.onAbort(a)
	}
	for ownerCh.ReceiveAsync(nil) {
		l.onOwnerUnload()
	}
}

func (l *lifecycle) onAbort(a AbortRequest) {
	if l.preLive() {
		l.setAbort(l.normalizeAbort(a))
	}
}

func (l *lifecycle) onOwnerUnload() {
	if l.preLive() {
		l.setAbort(OwnerDisposedError(l.id))
		return
	}
	l.requestDispose()
}

func (l *lifecycle) requestDispose() {
	if l.phase == PhaseLive {
		l.disposeWanted = true
	}
}

// watch receives the abort and owner-unload signals and the root
// cancellation for the whole run.
func (l *lifecycle) watch() {
	abortCh := workflow.GetSignalChannel(l.ctx, SignalAbort)
	ownerCh := workflow.GetSignalChannel(l.ctx, SignalOwnerUnload)
	root := l.ctx
	workflow.Go(l.dctx, func(gctx workflow.Context) {
		rootDone := false
		for {
			sel := workflow.NewSelector(gctx)
			sel.AddReceive(abortCh, func(c workflow.ReceiveChannel, _ bool) {
				var a AbortRequest
				c.Receive(gctx, &a)
				l.onAbort(a)
			})
			sel.AddReceive(ownerCh, func(c workflow.ReceiveChannel, _ bool) {
				c.Receive(gctx, nil)
				l.onOwnerUnload()
			})
			if !rootDone {
				sel.AddReceive(root.Done(), func(workflow.ReceiveChannel, bool) {
					rootDone = true
					l.onCancel(abortCh, ownerCh)
				})
			}
			sel.Select(gctx)
		}
	})
}

// syncCancel makes sure a root cancellation is accounted for before a
// decision, even if the watcher has not run yet in this workflow task. The
// watcher accounts for it: an abort or owner-unload signal that arrived in
// the same workflow task as the cancellation is already held by the
// watcher's blocked selector, where a receive from here would not see it,
// so the decision waits until the watcher has handled that signal and then
// the cancellation.
func (l *lifecycle) syncCancel() {
	if l.ctx.Err() != nil && !l.cancelSeen {
		_ = workflow.Await(l.dctx, func() bool { return l.cancelSeen })
	}
}

// checkAbort returns the normalized abort, if any.
func (l *lifecycle) checkAbort() error {
	l.syncCancel()
	return l.abortErr
}

// register installs the query and update handlers shared by every phase.
func (l *lifecycle) register() error {
	if err := workflow.SetQueryHandler(l.ctx, QueryDescribe, l.describe); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(l.ctx, UpdateWaitReady, l.waitReady); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(l.ctx, UpdateAppend, l.handleAppendPayload,
		workflow.UpdateHandlerOptions{Validator: l.validateAppendPayload}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(l.ctx, UpdateDispose, l.handleDispose,
		workflow.UpdateHandlerOptions{Validator: l.validateDispose}); err != nil {
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

// storeCtx returns ctx with the options of the store activities. They
// heartbeat, so a cancellation reaches them promptly, and they run with
// wait-for-cancellation: an abandoned create or open is awaited after the
// rollback closed its handle id.
func (l *lifecycle) storeCtx(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           l.set.taskQueue,
		StartToCloseTimeout: l.set.timeout,
		HeartbeatTimeout:    l.set.heartbeat,
		WaitForCancellation: true,
		RetryPolicy:         l.retry(),
	})
}

// hookCtx returns ctx with the options of the hook activities. An
// abandoned hook is not waited for: it holds nothing the rollback must
// release, and its late result is ignored.
func (l *lifecycle) hookCtx(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           l.set.hookTaskQueue,
		StartToCloseTimeout: l.set.timeout,
		RetryPolicy:         l.retry(),
	})
}

func (l *lifecycle) retry() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    time.Minute,
		MaximumAttempts:    l.set.attempts,
		// A validation failure fails the same way on every attempt, even
		// from an activity (a hook, a worker in another SDK) that forgot to
		// mark it non-retryable.
		NonRetryableErrorTypes: []string{ErrTypeInvalidArgument},
	}
}

// unwrapActivity returns the error an activity or child workflow failed
// with, without Temporal's wrapper, so the original error is what the
// workflow returns.
func unwrapActivity(err error) error {
	if err == nil {
		return nil
	}
	var actErr *temporal.ActivityError
	if errors.As(err, &actErr) {
		if cause := errors.Unwrap(actErr); cause != nil {
			return cause
		}
	}
	var childErr *temporal.ChildWorkflowExecutionError
	if errors.As(err, &childErr) {
		if cause := errors.Unwrap(childErr); cause != nil {
			return cause
		}
	}
	return err
}

// errorMessage is an error's message without Temporal's decorations.
func errorMessage(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) {
		return "canceled"
	}
	return err.Error()
}

// errorType is an application error's type, or "".
func errorType(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Type()
	}
	return ""
}

func errorInfo(err error) ErrorInfo {
	return ErrorInfo{Message: errorMessage(err), Type: errorType(err)}
}

// nextHandleID returns a fresh handle id: a per-run random nonce recorded
// once through SideEffect, and a counter, so replays choose the same ids and
// no two runs share one.
func (l *lifecycle) nextHandleID() string {
	if l.nonce == "" {
		_ = workflow.SideEffect(l.dctx, func(workflow.Context) any {
			b := make([]byte, 12)
			_, _ = rand.Read(b)
			return hex.EncodeToString(b)
		}).Get(&l.nonce)
	}
	l.handleN++
	return fmt.Sprintf("h-%s-%d", l.nonce, l.handleN)
}

func (l *lifecycle) owner() jsonl.Owner {
	info := workflow.GetInfo(l.ctx)
	return jsonl.Owner{WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID}
}

// chooseHandle picks the write handle id before the create or open
// activity runs and pushes its close: a compensation closes the handle id
// whatever happened to the activity.
func (l *lifecycle) chooseHandle() jsonl.HandleRef {
	ref := jsonl.HandleRef{SessionID: l.id, HandleID: l.nextHandleID(), Access: jsonl.AccessWrite}
	l.ref = &ref
	l.push("close-handle", func(ctx workflow.Context) error {
		err := l.closeHandle(ctx)
		l.handleOpen = false
		return err
	})
	return ref
}

func (l *lifecycle) closeHandle(ctx workflow.Context) error {
	return unwrapActivity(workflow.ExecuteActivity(l.storeCtx(ctx), acts.CloseHandle,
		activities.HandleInput{Ref: *l.ref}).Get(ctx, nil))
}

// pushDisposeHook pushes the agent machine's teardown (the dispose hook).
func (l *lifecycle) pushDisposeHook() {
	if l.hooks.DisposeActivity == "" {
		return
	}
	l.push("dispose-hook", func(ctx workflow.Context) error {
		return unwrapActivity(workflow.ExecuteActivity(l.hookCtx(ctx), l.hooks.DisposeActivity,
			DisposeInput{SessionID: l.id, Reason: "rollback"}).Get(ctx, nil))
	})
}

func (l *lifecycle) push(step string, fn func(workflow.Context) error) {
	l.comps = append(l.comps, compensation{step: step, fn: fn})
}

// unwind runs the compensation stack in reverse in a disconnected context,
// recording (and logging) every compensation error and swallowing it.
func (l *lifecycle) unwind() {
	ctx, _ := workflow.NewDisconnectedContext(l.ctx)
	for i := len(l.comps) - 1; i >= 0; i-- {
		c := l.comps[i]
		if err := c.fn(ctx); err != nil {
			l.compErrs = append(l.compErrs, CompensationError{Step: c.step, Error: errorInfo(err)})
			workflow.GetLogger(l.ctx).Warn("compensation failed", "session", l.id, "step", c.step, "error", errorMessage(err))
		}
	}
	l.comps = nil
}

// race runs a step that an abort interrupts: it waits for the future start
// returns or for an abort, whichever comes first. On an abort it cancels the
// step and returns the normalized reason at once; the abandoned step is
// awaited (it runs with wait-for-cancellation) only after the rollback.
func (l *lifecycle) race(start func(workflow.Context) workflow.Future, out any) error {
	if err := l.checkAbort(); err != nil {
		return err
	}
	sctx, cancel := workflow.WithCancel(l.ctx)
	f := start(sctx)
	l.stepCancel = cancel
	_ = workflow.Await(l.dctx, func() bool { return f.IsReady() || l.abortErr != nil || l.ctx.Err() != nil })
	l.stepCancel = nil
	if err := l.checkAbort(); err != nil {
		cancel()
		if !f.IsReady() {
			l.outstanding = append(l.outstanding, f)
		}
		return err
	}
	return unwrapActivity(f.Get(l.dctx, out))
}

// fail records the failure, unwinds the compensation stack, waits for
// abandoned steps and running handlers, and returns err unchanged. WaitReady
// returns the failure once the rollback is done, in the workflow task that
// completes the run: a caller who sees it can start a new run of the id at
// once (runs recorded before the failAfterRollback change answered first).
func (l *lifecycle) fail(err error) error {
	l.failure = err
	answerLate := workflow.GetVersion(l.dctx, failAfterRollbackChange, workflow.DefaultVersion, 1) >= 1
	l.failureAnswered = !answerLate
	workflow.GetLogger(l.ctx).Info("session lifecycle failed", "session", l.id, "error", errorMessage(err))
	l.unwind()
	for _, f := range l.outstanding {
		_ = f.Get(l.dctx, nil)
	}
	l.outstanding = nil
	l.setPhase(PhaseClosed)
	l.failureAnswered = true
	l.awaitHandlers()
	return err
}

func (l *lifecycle) awaitHandlers() {
	_ = workflow.Await(l.dctx, func() bool { return workflow.AllHandlersFinished(l.dctx) })
}

// validateAgentOptions applies SPEC 7.3 step 3.
func validateAgentOptions(o *AgentOptions) error {
	if o == nil || o.MaxTokens == nil {
		return nil
	}
	v := *o.MaxTokens
	if v < 1 || v > session.MaxSafeInteger || v != float64(int64(v)) {
		return temporal.NewNonRetryableApplicationError(MaxTokensText, ErrTypeTypeError, nil)
	}
	return nil
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
		return temporal.NewNonRetryableApplicationError(err.Error(), string(jsonl.CodeSeqMismatch), nil)
	}
	return nil
}

// setupRulesChange names the versioned change that refuses, before the
// commit hook, setup events breaking a rule the store applies at append.
// Earlier runs failed when the store refused them at the commit point.
const setupRulesChange = "setup-append-rules"

// initialize runs SPEC 7.3 step 4 for create and resume: setup, commit,
// the commit point (store) and publication, then the live phase.
// eventCount is the session's length including the unstored suffix;
// storeSuffix stores that suffix plus the setup events as one batch.
func (l *lifecycle) initialize(eventCount int64, storeSuffix func(extra []session.Event) error) (DisposeResult, error) {
	l.setPhase(PhaseSetup)
	in := SetupInput{SessionID: l.id, Source: l.source, Handle: *l.ref, Header: l.header, EventCount: eventCount, StoredCount: l.nextSeq}
	var setup SetupResult
	if l.hooks.SetupActivity != "" {
		err := l.race(func(ctx workflow.Context) workflow.Future {
			return workflow.ExecuteActivity(l.hookCtx(ctx), l.hooks.SetupActivity, in)
		}, &setup)
		if err != nil {
			return DisposeResult{}, l.fail(err)
		}
		if len(setup.Events) > 0 {
			if err := l.checkBatch("setup events", setup.Events, eventCount); err != nil {
				return DisposeResult{}, l.fail(err)
			}
			if err := session.CheckAppendable(l.header, eventCount, setup.Events); err != nil {
				// Versioned only where it matters: setup events the store
				// would refuse now fail here, before the commit hook.
				if workflow.GetVersion(l.dctx, setupRulesChange, workflow.DefaultVersion, 1) >= 1 {
					return DisposeResult{}, l.fail(invalidArgument("setup events: " + err.Error()))
				}
			}
		}
	}
	if err := l.checkAbort(); err != nil {
		return DisposeResult{}, l.fail(err)
	}
	if l.hooks.CommitActivity != "" {
		err := unwrapActivity(workflow.ExecuteActivity(l.hookCtx(l.dctx), l.hooks.CommitActivity, in).Get(l.dctx, nil))
		if err != nil {
			return DisposeResult{}, l.fail(err)
		}
	}
	if err := l.checkAbort(); err != nil {
		return DisposeResult{}, l.fail(err)
	}
	l.setPhase(PhaseCommitting)
	if err := storeSuffix(setup.Events); err != nil {
		return DisposeResult{}, l.fail(err)
	}
	if err := l.publishAll(); err != nil {
		return DisposeResult{}, l.fail(err)
	}
	return l.goLive()
}

// publishAll publishes the lifecycle entries with the checks of SPEC 7.3
// step 4d.
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

// goLive enters the live phase: the close compensation now belongs to
// disposal, WaitReady returns, and a parent SessionLoop is told.
func (l *lifecycle) goLive() (DisposeResult, error) {
	l.comps = nil
	l.setPhase(PhaseLive)
	info := workflow.GetInfo(l.ctx)
	l.ready = &SessionInfo{
		SessionID:           l.id,
		WorkflowID:          info.WorkflowExecution.ID,
		RunID:               info.WorkflowExecution.RunID,
		Handle:              *l.ref,
		Header:              l.header,
		InheritedEventCount: l.inherited,
		NextSeq:             l.nextSeq,
		FirstLiveSeq:        l.firstLive,
		LastTurn:            l.lastTurn,
		Source:              l.source,
	}
	if p := info.ParentWorkflowExecution; p != nil {
		notice := ReadyNotice{SessionID: l.id, RunID: info.WorkflowExecution.RunID}
		workflow.Go(l.dctx, func(gctx workflow.Context) {
			_ = workflow.SignalExternalWorkflow(gctx, p.ID, "", SignalSessionReady, notice).Get(gctx, nil)
		})
	}
	return l.runLive()
}

// aggregate settles a disposal: no failure, one as-is, or several as
// `agent "<id>" disposal failed` with the members in order.
func aggregate(id string, errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	infos := make([]ErrorInfo, len(errs))
	msgs := make([]string, len(errs))
	for i, err := range errs {
		infos[i] = errorInfo(err)
		msgs[i] = infos[i].Message
	}
	return temporal.NewNonRetryableApplicationError(
		"agent "+quoteID(id)+" disposal failed: "+strings.Join(msgs, "; "), ErrTypeAggregate, nil, infos)
}
