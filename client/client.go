// Package client is a typed Go client for applications that drive
// sessionflow sessions through Temporal: it starts CreateSession and
// ResumeSession workflows and awaits them live, appends events through the
// Append update, disposes, cancels, describes and lists sessions, starts and
// stops SessionLoop hosts, exports workflow histories for replay fixtures and
// forfeits the lease of a session whose owner is gone, after checking through
// Temporal that it is gone.
//
// Every name and type it uses is the public contract of docs/API.md,
// declared in package wire; the client imports no other package of the
// module (a test pins it, docs/DECISIONS.md D83), so it does not compile
// the store, the providers or the workflows. It reads a store through the
// interfaces EventReader and wire.LeaseStore, which *jsonl.Store implements.
// Failures reported by the workflows come back as *Error, whose Error() is
// the reference text and whose class is matched with errors.Is
// (ErrAlreadyExists, ErrNotLive, ErrSeqMismatch, wire.ErrNotFound, which
// is jsonl.ErrNotFound, ...).
package client

import (
	"context"
	"errors"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	temporalclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/wire"
)

// DefaultTaskQueue is the task queue of the session workflows when Options
// leaves it empty; the worker polls it by default.
const DefaultTaskQueue = "sessionflow"

// DefaultMaxBatchEvents bounds the number of events of one Append batch sent
// by AppendStream when Options leaves it zero.
const DefaultMaxBatchEvents = 4096

// DefaultWorkflowTaskTimeout is the workflow task timeout of the session and
// loop workflows a Client starts when Options leaves it zero (docs/DECISIONS.md
// D48): a workflow task that a worker took and then died with is handed to
// another worker after it. Temporal's own default is 10 s.
const DefaultWorkflowTaskTimeout = time.Second

// Options configure a Client.
type Options struct {
	// TaskQueue is the task queue the session and loop workflows are started
	// on; default DefaultTaskQueue.
	TaskQueue string
	// MaxBatchBytes bounds the encoded size of one Append batch sent by
	// AppendStream. It must not exceed the session's own limit
	// (wire.Options.MaxBatchBytes); default wire.DefaultMaxBatchBytes.
	MaxBatchBytes int
	// MaxBatchEvents bounds the number of events of one Append batch sent by
	// AppendStream; default DefaultMaxBatchEvents.
	MaxBatchEvents int
	// Namespace is the namespace of the Temporal client, used to check that
	// sessionflow's search attributes are registered; default "default".
	Namespace string
	// WorkflowTaskTimeout bounds each workflow task of the session and loop
	// workflows this client starts (and of the runs they continue as new
	// into): a task a worker took and then died with is handed to another
	// worker after it. Zero means DefaultWorkflowTaskTimeout; a negative
	// value leaves it to the server (its default is 10 s, its maximum
	// 120 s). Session workflow tasks are small, so a short timeout shortens
	// the stall of a session whose worker crashed; raise it when a workflow
	// task may legitimately take longer (docs/DECISIONS.md D48).
	WorkflowTaskTimeout time.Duration
	// ParseLine decodes each line AppendStream reads and counts its size;
	// nil means wire.ParseEventLine, which decodes the envelope and leaves
	// the event rules to the session's Append validator. A program that
	// links package session sets session.ParseAppendLineWire, so that a
	// line this build's rules refuse stops the stream before its batch is
	// sent, with the line's number (cmd/starter does).
	ParseLine wire.LineParser[wire.Event]
	// Router, when set, spreads the session and loop workflows over
	// several shards (store roots, each served by its own task queue):
	// Create, Resume and LoopStart start on the task queue of the shard
	// the router picks for the id, or of the shard an OnShard call option
	// names, instead of TaskQueue (docs/API.md, Shards).
	Router *Router
}

// Client drives sessionflow sessions over a Temporal client. It is safe for
// concurrent use.
type Client struct {
	c    temporalclient.Client
	opts Options

	saOnce       sync.Once
	saRegistered bool
}

// Namespace returns the Temporal namespace the client was given (Options.Namespace).
func (c *Client) Namespace() string { return c.opts.Namespace }

// New returns a Client over c, which stays the caller's to close. Zero
// options take their defaults.
func New(c temporalclient.Client, opts Options) *Client {
	if opts.TaskQueue == "" {
		opts.TaskQueue = DefaultTaskQueue
	}
	if opts.MaxBatchBytes <= 0 {
		opts.MaxBatchBytes = wire.DefaultMaxBatchBytes
	}
	if opts.ParseLine == nil {
		opts.ParseLine = wire.ParseEventLine
	}
	if opts.MaxBatchEvents <= 0 {
		opts.MaxBatchEvents = DefaultMaxBatchEvents
	}
	switch {
	case opts.WorkflowTaskTimeout == 0:
		opts.WorkflowTaskTimeout = DefaultWorkflowTaskTimeout
	case opts.WorkflowTaskTimeout < 0:
		opts.WorkflowTaskTimeout = 0
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	return &Client{c: c, opts: opts}
}

// Options returns the client's options with their defaults applied.
func (c *Client) Options() Options { return c.opts }

// Temporal returns the underlying Temporal client.
func (c *Client) Temporal() temporalclient.Client { return c.c }

// Session is a live session: the SessionInfo its workflow's WaitReady update
// returned.
type Session struct {
	wire.SessionInfo
}

// AppendResult is the outcome of an Append: the stored cursor after the
// batch.
type AppendResult = wire.AppendResult

// startOptions are the options of a session or loop workflow start: a new
// run is allowed after a closed one, a running one refuses the start with an
// error. (WorkflowExecutionErrorWhenAlreadyStarted matters to the loop's
// ExecuteWorkflow; update-with-start fails a refused start by itself.)
//
// summary and details are what the Temporal UI shows of the run
// (wire.CreateSummary, wire.ResumeSummary, wire.LoopSummary): user
// metadata, outside the command sequence.
func (c *Client) startOptions(workflowID, taskQueue, summary, details string) temporalclient.StartWorkflowOptions {
	return temporalclient.StartWorkflowOptions{
		StaticSummary:                            summary,
		StaticDetails:                            details,
		ID:                                       workflowID,
		TaskQueue:                                taskQueue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		WorkflowTaskTimeout:                      c.opts.WorkflowTaskTimeout,
	}
}

// Create starts a CreateSession workflow (workflow id session/<id>) and waits
// until the session is live, returning what its WaitReady update reports, or
// the creation failure (rolled back by the workflow). A running execution of
// the same id fails with `session "<id>" already exists` (ErrAlreadyExists);
// a closed one does not prevent a new run, though the store still refuses an
// id it holds, with the same error.
//
// The start and WaitReady travel in one update-with-start request, so the
// update reaches the run with its first workflow task: one round trip, and
// the same history whatever the timing of the worker.
//
// With Options.Router the session starts on its shard's task queue (see
// ShardOf); OnShard picks the shard explicitly.
func (c *Client) Create(ctx context.Context, req wire.CreateSessionRequest, opts ...CallOption) (*Session, error) {
	if req.SessionID == "" {
		return nil, invalidArgument("", "create: the session id is required")
	}
	req.Options = c.withSearchAttributes(ctx, req.Options)
	summary, details := wire.CreateSummary(req)
	return c.startReady(ctx, req.SessionID, wire.CreateSessionName, req, summary, details, opts)
}

// Resume starts a ResumeSession workflow for the stored session id (the
// request's ResumeSessionID may be left empty; when set it must be id) and
// waits until the session is live: its crash repair is stored and its owner
// holds the write lease. A running execution of the id fails with
// ErrAlreadyExists; an unknown id with the store's SessionNotFound
// (jsonl.ErrNotFound). With Options.Router it starts on the session's
// shard, as Create does.
func (c *Client) Resume(ctx context.Context, id string, req wire.ResumeSessionRequest, opts ...CallOption) (*Session, error) {
	if id == "" {
		return nil, invalidArgument("", "resume: the session id is required")
	}
	if req.ResumeSessionID == "" {
		req.ResumeSessionID = id
	}
	if req.ResumeSessionID != id {
		return nil, invalidArgument(id, "resume of session %q: the request names session %q", id, req.ResumeSessionID)
	}
	req.Options = c.withSearchAttributes(ctx, req.Options)
	summary, details := wire.ResumeSummary(req)
	return c.startReady(ctx, id, wire.ResumeSessionName, req, summary, details, opts)
}

// withSearchAttributes returns the workflow options with SearchAttributes
// set when the namespace has sessionflow's search attributes registered, so
// List can read session id, phase and cwd from visibility. The caller's
// options are not modified.
func (c *Client) withSearchAttributes(ctx context.Context, o *wire.Options) *wire.Options {
	if !c.searchAttributesRegistered(ctx) {
		return o
	}
	var out wire.Options
	if o != nil {
		out = *o
	}
	out.SearchAttributes = true
	return &out
}

// searchAttributesRegistered asks the namespace once whether SessionId,
// SessionPhase and SessionCwd are registered as Keyword attributes. Any
// failure (no operator permission, an older server) counts as no.
func (c *Client) searchAttributesRegistered(ctx context.Context) bool {
	c.saOnce.Do(func() {
		op := c.c.OperatorService()
		if op == nil {
			return
		}
		resp, err := op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: c.opts.Namespace})
		if err != nil {
			return
		}
		custom := resp.GetCustomAttributes()
		for _, k := range []string{wire.SearchAttributeSessionID, wire.SearchAttributeSessionPhase, wire.SearchAttributeSessionCwd} {
			if custom[k] != enumspb.INDEXED_VALUE_TYPE_KEYWORD {
				return
			}
		}
		c.saRegistered = true
	})
	return c.saRegistered
}

// startReady starts the session workflow of id with its WaitReady update in
// one update-with-start request and returns the live session; a refused
// start is startError's, the failure of a run that ended before it could
// answer is the run's own, and after a reported failure it returns once the
// run has rolled back.
func (c *Client) startReady(ctx context.Context, id, workflowName string, req any, summary, details string, opts []CallOption) (*Session, error) {
	if err := checkIdentity(id); err != nil {
		return nil, err
	}
	shard, err := c.ShardOf(id, opts...)
	if err != nil {
		return nil, err
	}
	wid := wire.WorkflowID(id)
	op := c.c.NewWithStartWorkflowOperation(c.startOptions(wid, shard.TaskQueue, summary, details), workflowName, req)
	h, err := c.c.UpdateWithStartWorkflow(ctx, temporalclient.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: op,
		UpdateOptions: temporalclient.UpdateWorkflowOptions{
			WorkflowID:   wid,
			UpdateName:   wire.UpdateWaitReady,
			WaitForStage: temporalclient.WorkflowUpdateStageCompleted,
		},
	})
	var info wire.SessionInfo
	if err == nil {
		err = h.Get(ctx, &info)
	}
	if err == nil {
		return &Session{SessionInfo: info}, nil
	}
	var (
		started *serviceerror.WorkflowExecutionAlreadyStarted
		nf      *serviceerror.NotFound
		run     temporalclient.WorkflowRun
	)
	switch {
	case isNotReady(err):
		// The run started, and its task failed before WaitReady was
		// admitted: ask again once the task is retried.
		return c.WaitReady(ctx, id)
	case errors.As(err, &started) && workflowName == wire.ResumeSessionName:
		return nil, resumeRunningError(id, err)
	case errors.As(err, &started):
		return nil, startError(id, err)
	case h != nil:
		// The update reported: the run it reached is the one started.
		run = c.c.GetWorkflow(ctx, wid, h.RunID())
	case errors.As(err, &nf):
		// The start went through and the run ended before the update
		// reached it: its own failure is the answer.
		run = c.c.GetWorkflow(ctx, wid, "")
		if rerr := run.Get(ctx, nil); rerr != nil {
			return nil, callError("session", id, rerr)
		}
	default:
		// The request failed before the start reported back.
		return nil, startError(id, err)
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		// The session reported its failure; the run is now rolling back.
		// Wait for it to end, so that a caller who sees the failure sees it
		// rolled back (no lease, the id free for a retry).
		_ = run.Get(ctx, nil)
	}
	return nil, callError("wait for session", id, err)
}

// update runs a session update to completion and decodes its result. An
// update that reaches no running session fails as closedError says
// (ErrSessionDisposed, ErrNotRunning).
func (c *Client) update(ctx context.Context, id, name string, result any, args ...any) error {
	h, err := c.updateWorkflow(ctx, temporalclient.UpdateWorkflowOptions{
		WorkflowID:   wire.WorkflowID(id),
		UpdateName:   name,
		Args:         args,
		WaitForStage: temporalclient.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, result)
	}
	return c.closedError(ctx, id, name, err)
}

// Append appends a bounded batch to the live session id through the Append
// update and returns once it is durably stored. The batch must continue the
// session's seqs (or repeat a stored batch exactly); the update validator's
// rejection comes back as an *Error with the reference text
// (ErrSeqMismatch, ErrBatchTooLarge, ErrNotLive, ErrLifecycleDisposed,
// ErrInvalidArgument). A call that ends before the session answers (ctx
// done, no worker running) is ErrOutcomeUnknown: the batch may be stored
// later, and retrying the same batch is safe (a batch already stored, or
// accepted and not yet stored, is answered without storing it twice).
func (c *Client) Append(ctx context.Context, id string, events []wire.Event) (AppendResult, error) {
	var res AppendResult
	err := c.update(ctx, id, wire.UpdateAppend, &res, wire.AppendRequest{Events: events})
	return res, appendError(id, err)
}

// AppendAtEnd appends a bounded batch at the end of the live session id
// (an Append update with AtEnd) and returns once it is durably stored. The
// events' seqs are their indexes in the batch (0, 1, ...); the session
// numbers them after every batch it accepted before, and the result's
// NextSeq is the seq after the batch's last event: the batch holds the
// seqs NextSeq-len(events) to NextSeq-1. Callers appending this way need
// not agree on seqs, so they may call at once; the batches that reach the
// session together are stored by one write, and one caller's refused
// batch fails that caller alone. A call that ends before the session
// answers is ErrOutcomeUnknown and, unlike Append, must not simply be
// sent again: a batch at the end is identified by its update only, and a
// new call stores it again (read the log to learn whether it landed).
func (c *Client) AppendAtEnd(ctx context.Context, id string, events []wire.Event) (AppendResult, error) {
	var res AppendResult
	err := c.update(ctx, id, wire.UpdateAppend, &res, wire.AppendRequest{Events: events, AtEnd: true})
	return res, appendError(id, err)
}

// Dispose disposes the live session id through the Dispose update: the
// dispose hook runs, pending appends drain, the handle closes and the
// workflow completes. One failure is returned as it is, several as
// ErrAggregate with the parts in Error.Errors.
func (c *Client) Dispose(ctx context.Context, id string) (wire.DisposeResult, error) {
	var res wire.DisposeResult
	err := c.update(ctx, id, wire.UpdateDispose, &res)
	return res, callError("dispose session", id, err)
}

// Cancel aborts a session that is not live yet, with reason (empty gives
// `agent "<id>" creation aborted`), by signalling Abort {reason, isError:
// false} and then requesting cancellation; a live session is disposed by the
// cancellation. It returns once the request is delivered, not once the
// workflow has closed.
func (c *Client) Cancel(ctx context.Context, id, reason string) error {
	wid := wire.WorkflowID(id)
	if err := c.c.SignalWorkflow(ctx, wid, "", wire.SignalAbort, wire.AbortRequest{Reason: reason}); err != nil {
		return callError("signal Abort to session", id, err)
	}
	return callError("cancel session", id, c.c.CancelWorkflow(ctx, wid, ""))
}

// Describe returns the Describe query of the session's latest run: phase,
// handle, cursor, lifecycle entries, compensation errors and failure. A
// closed run is described as well while the server keeps it.
func (c *Client) Describe(ctx context.Context, id string) (wire.Description, error) {
	var d wire.Description
	v, err := c.c.QueryWorkflow(ctx, wire.WorkflowID(id), "", wire.QueryDescribe)
	if err == nil {
		err = v.Get(&d)
	}
	return d, callError("describe session", id, err)
}
