package workflows

import (
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

type loopChild struct {
	wire.LoopChild
	future  workflow.ChildWorkflowFuture
	cancel  workflow.CancelFunc
	started bool
	err     error
}

type loop struct {
	ctx      workflow.Context
	dctx     workflow.Context
	in       wire.SessionLoopInput
	active   bool
	children []*loopChild
	failures []wire.ConfigStartFailure
	running  int // config starts in progress
	// starts holds the Start requests the validator decoded
	// (decodedRequests).
	starts decodedRequests[StartRequest]
}

// configEntry is a validated configured agent.
type configEntry struct {
	cfg       wire.AgentConfig
	sessionID string
	mode      string // "create", "restore" or "resume"
}

// validateLoop applies the construction checks of LIFECYCLE.md §11.3 and
// resolves the identities.
func validateLoop(in wire.SessionLoopInput) ([]configEntry, error) {
	if v := in.MaxParallelToolCalls; v != nil && (*v < 1 || *v != float64(int64(*v)) || *v > wire.MaxSafeInteger) {
		return nil, invalidArgument("maxParallelToolCalls must be a positive integer")
	}
	entries := make([]configEntry, 0, len(in.Agents))
	seen := map[string]string{}
	for _, cfg := range in.Agents {
		if cfg.ID == "" {
			return nil, invalidArgument("agent config id must be a non-empty string")
		}
		if ident, ok := in.ConfiguredAgentIdentities[cfg.ID]; ok {
			cfg.SessionID, cfg.ResumeSessionID = "", ""
			if ident.Resume {
				cfg.ResumeSessionID = ident.ID
			} else {
				cfg.SessionID = ident.ID
			}
		}
		if cfg.SessionID != "" && cfg.ResumeSessionID != "" {
			return nil, invalidArgument("agent " + quoteID(cfg.ID) + ": sessionId and resumeSessionId are mutually exclusive")
		}
		// The permission options only: the others are the create's to
		// check, after its handle exists (LIFECYCLE.md §4 step 4).
		perm := wire.AgentOptions{SandboxMode: cfg.SandboxMode, ApprovalPolicy: cfg.ApprovalPolicy, Preset: cfg.Preset,
			ApprovalRules: cfg.ApprovalRules, ApprovalTimeoutMs: cfg.ApprovalTimeoutMs}
		if err := validateAgentOptions(&perm); err != nil {
			// The create's own typed error, naming the agent.
			var app *temporal.ApplicationError
			if errors.As(err, &app) {
				return nil, temporal.NewNonRetryableApplicationError("agent "+quoteID(cfg.ID)+": "+app.Message(), app.Type(), nil)
			}
			return nil, err
		}
		e := configEntry{cfg: cfg}
		switch {
		case cfg.ResumeSessionID != "":
			e.sessionID, e.mode = cfg.ResumeSessionID, "resume"
		case cfg.SessionID != "":
			e.sessionID, e.mode = cfg.SessionID, "restore"
		default:
			e.mode = "create"
		}
		if e.sessionID != "" {
			if err := wire.ValidateID(e.sessionID); err != nil {
				return nil, invalidArgument("agent " + quoteID(cfg.ID) + ": " + err.Error())
			}
			if prev, dup := seen[e.sessionID]; dup {
				return nil, invalidArgument("agents " + quoteID(prev) + " and " + quoteID(cfg.ID) +
					" use duplicate exact session identity " + quoteID(e.sessionID))
			}
			seen[e.sessionID] = cfg.ID
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// SessionLoop is the host of sessions (LIFECYCLE.md §11): it starts sessions as
// child workflows (parent close policy request-cancel) through the Start
// update and from its configured agents, keeps their registry, and on
// deactivation (its cancellation) refuses new work with `agent loop is not
// active`, aborts every child still starting, disposes the live ones, and
// returns once every child has settled.
func SessionLoop(ctx workflow.Context, in wire.SessionLoopInput) (wire.LoopDescription, error) {
	in = loopPermissions(ctx, in)
	entries, err := validateLoop(in)
	if err != nil {
		return wire.LoopDescription{}, err
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	lp := &loop{ctx: ctx, dctx: dctx, in: in, active: true}
	for _, name := range []string{wire.QueryDescribe, wire.LegacyQueryDescribe} {
		if err := workflow.SetQueryHandler(ctx, name, func() (wire.LoopDescription, error) { return lp.describe(), nil }); err != nil {
			return wire.LoopDescription{}, err
		}
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, wire.UpdateStart, lp.handleStartPayload,
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in converter.RawValue) error {
			return boundRejection(lp.validateStartPayload(ctx, in))
		}}); err != nil {
		return wire.LoopDescription{}, err
	}
	readyChs := signalChannels(ctx, wire.SignalSessionReady, wire.LegacySignalSessionReady)
	workflow.Go(dctx, func(gctx workflow.Context) {
		for {
			var n wire.ReadyNotice
			sel := workflow.NewSelector(gctx)
			for _, readyCh := range readyChs {
				sel.AddReceive(readyCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(gctx, &n) })
			}
			sel.Select(gctx)
			lp.onReady(n)
		}
	})
	for _, e := range entries {
		lp.running++
		workflow.Go(dctx, func(gctx workflow.Context) {
			defer func() { lp.running-- }()
			lp.startConfigured(gctx, e)
		})
	}
	_ = workflow.Await(ctx, func() bool { return false })
	lp.deactivate()
	return lp.describe(), nil
}

// onReady marks the child a SessionReady notice names live.
func (lp *loop) onReady(n wire.ReadyNotice) {
	for _, c := range lp.children {
		if c.SessionID == n.SessionID && c.State == wire.ChildStarting && (c.RunID == "" || c.RunID == n.RunID) {
			c.State, c.WasLive = wire.ChildLive, true
		}
	}
}

func (lp *loop) describe() wire.LoopDescription {
	d := wire.LoopDescription{
		Active:              lp.active,
		Children:            make([]wire.LoopChild, 0, len(lp.children)),
		Effects:             []string{},
		ConfigStartFailures: append([]wire.ConfigStartFailure{}, lp.failures...),
	}
	for _, c := range lp.children {
		d.Children = append(d.Children, c.LoopChild)
		if c.State == wire.ChildLive {
			d.Effects = append(d.Effects, "agentLoop.lifecycle("+c.SessionID+")")
		}
	}
	return d
}

// occupied reports whether a child with this session id has not settled.
func (lp *loop) occupied(id string) bool {
	for _, c := range lp.children {
		if c.SessionID == id && c.State != wire.ChildSettled {
			return true
		}
	}
	return false
}

func (lp *loop) validateStart(req StartRequest) error {
	if !lp.active {
		return LoopInactiveError()
	}
	if (req.Create == nil) == (req.Resume == nil) {
		return invalidArgument("start needs exactly one of create and resume")
	}
	if req.Create != nil {
		if err := session.CheckRepairable(req.Create.Seed); err != nil {
			return invalidArgument(fmt.Sprintf("invalid Start request: seed: %v", err))
		}
	}
	id := startID(req)
	if lp.occupied(id) {
		return AlreadyExistsError(id)
	}
	return nil
}

func startID(req StartRequest) string {
	if req.Create != nil {
		return req.Create.SessionID
	}
	return req.Resume.ResumeSessionID
}

func (lp *loop) handleStart(ctx workflow.Context, req StartRequest) (wire.StartResult, error) {
	c, err := lp.start(ctx, req, "")
	if err != nil {
		return wire.StartResult{}, err
	}
	return wire.StartResult{SessionID: c.SessionID, WorkflowID: c.WorkflowID, RunID: c.RunID}, nil
}

// start starts a child session and returns once it is running.
func (lp *loop) start(ctx workflow.Context, req StartRequest, configID string) (*loopChild, error) {
	if !lp.active {
		return nil, LoopInactiveError()
	}
	id := startID(req)
	if lp.occupied(id) {
		return nil, AlreadyExistsError(id)
	}
	cctx, cancel := workflow.WithCancel(lp.dctx)
	// The summary and details are user metadata: a replay does not
	// compare them, so they need no version gate.
	var summary, details string
	if req.Create != nil {
		summary, details = wire.CreateSummary(*req.Create)
	} else {
		summary, details = wire.ResumeSummary(*req.Resume)
	}
	cctx = workflow.WithChildOptions(cctx, workflow.ChildWorkflowOptions{
		StaticSummary:       summary,
		StaticDetails:       details,
		WorkflowID:          wire.WorkflowID(id),
		TaskQueue:           lp.in.SessionTaskQueue,
		ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation: true,
	})
	c := &loopChild{LoopChild: wire.LoopChild{SessionID: id, ConfigID: configID, WorkflowID: wire.WorkflowID(id), State: wire.ChildStarting}, cancel: cancel}
	if req.Create != nil {
		c.Mode = "create"
		c.future = workflow.ExecuteChildWorkflow(cctx, CreateSession, *req.Create)
	} else {
		c.Mode = "resume"
		c.future = workflow.ExecuteChildWorkflow(cctx, ResumeSession, *req.Resume)
	}
	lp.children = append(lp.children, c)
	hctx, _ := workflow.NewDisconnectedContext(ctx)
	var exec workflow.Execution
	if err := c.future.GetChildWorkflowExecution().Get(hctx, &exec); err != nil {
		err = startError(id, err)
		lp.settle(c, err)
		return nil, err
	}
	c.RunID, c.started = exec.RunID, true
	workflow.Go(lp.dctx, func(gctx workflow.Context) {
		lp.settle(c, c.future.Get(gctx, nil))
	})
	return c, nil
}

// startError maps a refused child start: a running execution with the same
// id is a duplicate live session.
func startError(id string, err error) error {
	var started *temporal.ChildWorkflowExecutionAlreadyStartedError
	var svc *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) || errors.As(err, &svc) {
		return AlreadyExistsError(id)
	}
	return unwrapActivity(err)
}

func (lp *loop) settle(c *loopChild, err error) {
	c.State = wire.ChildSettled
	if err != nil && !workflow.IsContinueAsNewError(err) {
		c.err = unwrapActivity(err)
		info := errorInfo(c.err)
		c.Error = &info
	}
}

// await waits until the child is live or settled; it returns the child's
// failure if it settled before going live.
func (lp *loop) await(ctx workflow.Context, c *loopChild) error {
	_ = workflow.Await(ctx, func() bool { return c.State != wire.ChildStarting })
	if c.State == wire.ChildSettled && !c.WasLive {
		if c.err != nil {
			return c.err
		}
	}
	return nil
}

// freshID returns "<configId>-session-<uuid>", a random (version 4) UUID
// recorded once through SideEffect, so replays choose the same id.
func freshID(ctx workflow.Context, configID string) string {
	var u string
	_ = workflow.SideEffect(ctx, func(workflow.Context) any {
		return uuid.NewString()
	}).Get(&u)
	return configID + "-session-" + u
}

func (lp *loop) createRequest(e configEntry, id string) StartRequest {
	return StartRequest{Create: &CreateSessionRequest{
		SessionID:    id,
		Meta:         &wire.SessionMeta{Cwd: e.cfg.Cwd},
		AgentOptions: lp.agentOptions(e.cfg),
		Hooks:        lp.in.Hooks,
		Options:      lp.in.Options,
	}}
}

func (lp *loop) resumeRequest(e configEntry) StartRequest {
	return StartRequest{Resume: &wire.ResumeSessionRequest{
		ResumeSessionID: e.sessionID,
		AgentOptions:    lp.agentOptions(e.cfg),
		Hooks:           lp.in.Hooks,
		Options:         lp.in.Options,
	}}
}

func (lp *loop) agentOptions(cfg wire.AgentConfig) *wire.AgentOptions {
	return configOptions(cfg, lp.in.MaxParallelToolCalls)
}

// configOptions are the agent options of a configured agent's create or
// resume.
func configOptions(cfg wire.AgentConfig, maxParallel *float64) *wire.AgentOptions {
	return &wire.AgentOptions{Provider: cfg.Provider, Model: cfg.Model, ReasoningEffort: cfg.ReasoningEffort, MaxTokens: cfg.MaxTokens,
		MaxParallelToolCalls: maxParallel,
		SandboxMode:          cfg.SandboxMode, NetworkAccess: cfg.NetworkAccess, ApprovalPolicy: cfg.ApprovalPolicy, Preset: cfg.Preset,
		ApprovalRules: cfg.ApprovalRules, ApprovalTimeoutMs: cfg.ApprovalTimeoutMs}
}

// loopPermissions returns in with its configured agents' permission
// options, or, in a run that predates them (loopPermissionsChange, asked
// only when an agent sets one), without them, as those runs ignored them.
func loopPermissions(ctx workflow.Context, in wire.SessionLoopInput) wire.SessionLoopInput {
	if !slices.ContainsFunc(in.Agents, wire.AgentConfig.HasPermissions) ||
		workflow.GetVersion(ctx, loopPermissionsChange, workflow.DefaultVersion, 1) >= 1 {
		return in
	}
	agents := make([]wire.AgentConfig, len(in.Agents))
	for i, cfg := range in.Agents {
		cfg.SandboxMode, cfg.NetworkAccess, cfg.ApprovalPolicy, cfg.Preset, cfg.ApprovalRules, cfg.ApprovalTimeoutMs = "", false, "", "", nil, nil
		agents[i] = cfg
	}
	in.Agents = agents
	return in
}

// startConfigured starts one configured agent (LIFECYCLE.md §11.3).
func (lp *loop) startConfigured(ctx workflow.Context, e configEntry) {
	run := func(req StartRequest) error {
		c, err := lp.start(ctx, req, e.cfg.ID)
		if err != nil {
			return err
		}
		return lp.await(ctx, c)
	}
	switch e.mode {
	case "create":
		id := freshID(ctx, e.cfg.ID)
		lp.report(e, id, run(lp.createRequest(e, id)))
	case "resume":
		lp.report(e, e.sessionID, run(lp.resumeRequest(e)))
	case "restore":
		_ = workflow.Await(ctx, func() bool { return !lp.active || !lp.occupied(e.sessionID) })
		if !lp.active {
			return
		}
		err := run(lp.resumeRequest(e))
		if err != nil && errorType(err) == string(wire.CodeNotFound) && lp.active {
			err = run(lp.createRequest(e, e.sessionID))
		}
		lp.report(e, e.sessionID, err)
	}
}

// report records a config start failure, unless the loop is no longer
// active (late failures after deactivation are dropped).
func (lp *loop) report(e configEntry, id string, err error) {
	if err == nil || !lp.active {
		return
	}
	info := errorInfo(err)
	workflow.GetLogger(lp.ctx).Warn(fmt.Sprintf("agent %s: config-driven %s of %s failed: %s", quoteID(e.cfg.ID), e.mode, quoteID(id), info.Message),
		"configId", e.cfg.ID, "sessionId", id, "errorType", info.Type)
	lp.failures = append(lp.failures, wire.ConfigStartFailure{ConfigID: e.cfg.ID, SessionID: id, Mode: e.mode, Error: info})
}

// deactivate refuses new work, aborts every starting child with `agent loop
// is not active`, cancels every child (a live child disposes), and waits
// until every child and every configured start has settled.
func (lp *loop) deactivate() {
	lp.active = false
	abort := wire.AbortRequest{Reason: LoopInactiveText, IsError: true, Type: wire.ErrTypeLoopInactive}
	for _, c := range lp.children {
		if c.State == wire.ChildSettled {
			continue
		}
		if c.started && c.State == wire.ChildStarting {
			_ = c.future.SignalChildWorkflow(lp.dctx, sentName(lp.dctx, wire.SignalAbort, wire.LegacySignalAbort), abort).Get(lp.dctx, nil)
		}
		c.cancel()
	}
	_ = workflow.Await(lp.dctx, func() bool {
		for _, c := range lp.children {
			if c.State != wire.ChildSettled {
				return false
			}
		}
		return lp.running == 0 && workflow.AllHandlersFinished(lp.dctx)
	})
}
