package workflows

// Subagents (docs/API.md "Subagents", D119): a call of the subagent tool
// runs as a one-shot child session, a child workflow of the calling
// session's, with its own log. The parent's history holds the child's
// start and result, never its conversation.

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/google/uuid"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// subagentDescriptor is the data of a child's subagent/descriptor.
type subagentDescriptor struct {
	Version  int    `json:"version"`
	Mode     string `json:"mode"`
	Provider string `json:"provider"`
	Label    string `json:"label,omitempty"`
}

// isSubagentCall reports whether the call c runs as a child session.
func (a *agentLoop) isSubagentCall(c agent.CallRef) bool {
	return c.Name == wire.SubagentToolName && a.gates.taken(a.dctx, subagentToolChange)
}

// childRequest is the CreateSession request of the child a subagent call
// starts: the parent's route, limits and workflow options, the child's
// lineage (parentSession, origin subagent, its depth, the parent's cwd)
// and its task. The child's permissions are the delegation's: the
// parent's sandbox mode, and approval policy never (the harness's rule).
func (a *agentLoop) childRequest(s agent.SubagentStart) CreateSessionRequest {
	var opts *wire.AgentOptions
	if a.agentOptions != nil {
		o := *a.agentOptions
		o.SandboxMode, o.ApprovalPolicy, o.Preset, o.ApprovalRules = "", "", "", nil
		opts = &o
	}
	task := &wire.SubagentTask{
		Prompt:         s.Prompt,
		Label:          s.Label,
		Provider:       wire.SubagentProviderSpawn,
		ApprovalPolicy: wire.ApprovalNever,
	}
	if a.agentOptions != nil && a.agentOptions.SubagentApprovalPolicy != "" {
		// The user's policy for children overrides the harness's rule.
		task.ApprovalPolicy = a.agentOptions.SubagentApprovalPolicy
	}
	if a.perm.SandboxMode != wire.DefaultSandboxMode {
		task.SandboxMode = a.perm.SandboxMode
	}
	return CreateSessionRequest{
		SessionID: s.ChildSessionID,
		Meta: &wire.SessionMeta{
			Cwd:             a.log.header.Cwd,
			ParentSession:   a.id,
			Origin:          wire.OriginSubagent,
			DelegationDepth: s.Depth,
		},
		AgentOptions: opts,
		Options:      a.options,
		Subagent:     task,
	}
}

// delegate runs the child of the accepted subagent call at idx: the child
// workflow, then the RunTool that stores its answer as the call's result
// (base with the Finish step). done receives that RunTool's outcome, or
// the child's cancellation. The child runs in callsCtx: a cancelled turn
// cancels it, and it ends its turn with cause parent and disposes itself;
// the workflow's close cancels it too (PARENT_CLOSE_POLICY_REQUEST_CANCEL).
// The answer is stored past a cancel (dctx), so what the child said before
// it stopped reaches the parent's log.
func (t *turnRun) delegate(callsCtx workflow.Context, sel workflow.Selector, idx int, base agent.ToolInput, s agent.SubagentStart, done func(agent.ToolOutcome, error)) {
	a := t.a
	t.calls[idx].ChildSessionID = s.ChildSessionID
	summary := "subagent · " + wire.SummaryName(s.Label)
	cctx := workflow.WithChildOptions(callsCtx, workflow.ChildWorkflowOptions{
		StaticSummary:       summary,
		StaticDetails:       "session " + s.ChildSessionID + " · parent " + a.id,
		WorkflowID:          wire.WorkflowID(s.ChildSessionID),
		TaskQueue:           workflow.GetInfo(a.dctx).TaskQueueName,
		ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation: true,
	})
	f := workflow.ExecuteChildWorkflow(cctx, CreateSession, a.childRequest(s))
	sel.AddFuture(f, func(f workflow.Future) {
		var r wire.DisposeResult
		err := f.Get(a.dctx, &r)
		delete(a.childApprovals, s.ChildSessionID)
		fin := agent.SubagentFinish{ChildSessionID: s.ChildSessionID}
		switch {
		case err != nil && temporal.IsCanceledError(err):
			// Cancelled before it ended a turn: the turn's end closes
			// the call.
			done(agent.ToolOutcome{}, err)
			return
		case err != nil:
			fin.Failure = errorMessage(unwrapChild(err))
		case r.Subagent == nil:
			fin.Failure = "the child session was disposed before its turn ended"
		default:
			reason := r.Subagent.Reason
			fin.Reason = &reason
		}
		in := base
		in.Subagent = &agent.SubagentStep{Finish: &fin}
		ctx := t.span.Context(a.set.toolCtx(a.dctx))
		g := workflow.ExecuteActivity(a.act(ctx, turnLabel(t.summary.Turn)+" · "+summary+" · store the answer"), wire.RunToolActivity, in)
		sel.AddFuture(g, func(g workflow.Future) {
			var o agent.ToolOutcome
			done(o, g.Get(a.dctx, &o))
		})
	})
}

// unwrapChild returns the child workflow's own failure.
func unwrapChild(err error) error {
	var ce *temporal.ChildWorkflowExecutionError
	if errors.As(err, &ce) {
		if inner := errors.Unwrap(ce); inner != nil {
			return inner
		}
	}
	return err
}

// delegation sets up a one-shot child (CreateSession with a
// SubagentTask): its permissions are the task's, pinned with source
// delegation (the sandbox mode only when the parent's is not the
// default), and its prompt is its one next-turn input.
func (a *agentLoop) delegation(task *wire.SubagentTask) error {
	if task.Prompt == "" {
		return invalidArgument("subagent: the prompt must not be empty")
	}
	if task.Provider != wire.SubagentProviderSpawn {
		return invalidArgument("subagent: provider must be \"spawn\", not " + jsonString(task.Provider))
	}
	if task.ApprovalPolicy != wire.ApprovalNever && task.ApprovalPolicy != wire.ApprovalAsk {
		return invalidArgument("subagent: approvalPolicy must be \"never\" or \"ask\", not " + jsonString(task.ApprovalPolicy))
	}
	if err := a.routeMissing(); err != nil {
		return err
	}
	a.delegated = task
	a.perm.ApprovalPolicy = task.ApprovalPolicy
	a.pins = nil
	if task.SandboxMode != "" {
		a.perm.SandboxMode = task.SandboxMode
		a.pins = append(a.pins, pinEvent{wire.TypeSandboxMode, map[string]string{"mode": task.SandboxMode, "source": wire.SourceDelegation}})
	}
	a.pins = append(a.pins, pinEvent{wire.TypeApprovalPolicy, map[string]string{"policy": task.ApprovalPolicy, "source": wire.SourceDelegation}})
	a.perm.Preset = a.presetOf(a.perm.SandboxMode, a.perm.ApprovalPolicy)
	return nil
}

// delegatedInput queues a one-shot child's prompt as a stored next-turn
// input and returns its agent/inbox/spliced insertion at seq, stored with
// the setup events: the child's log reads as the harness's does (the
// insertion before turn/start, its removal after).
func (a *agentLoop) delegatedInput(seq, now int64) ([]session.Event, error) {
	task := a.delegated
	if task == nil {
		return nil, nil
	}
	content, err := json.Marshal(task.Prompt)
	if err != nil {
		return nil, invalidArgument(err.Error())
	}
	p, err := buildInput("subagent", wire.InputRequest{Content: content, MessageID: uuid.NewSHA1(uuid.NameSpaceOID, []byte("sessionflow/subagent-prompt/"+a.id)).String()}, "", a.set.maxBatchBytes)
	if err != nil {
		return nil, err
	}
	e, err := session.NewEvent(wire.TypeInboxSpliced, seq, now, session.InboxSplice{
		Target: wire.TargetNextTurn, Start: 0, Inserted: []json.RawMessage{p.Message},
	})
	if err != nil {
		return nil, invalidArgument(err.Error())
	}
	p.Stored = true
	a.inbox.queue(p, wire.TargetNextTurn, true)
	return []session.Event{e}, nil
}

// descriptor is the subagent/descriptor of a one-shot child's first step.
func (a *agentLoop) descriptor() subagentDescriptor {
	return subagentDescriptor{Version: 2, Mode: "one-shot", Provider: a.delegated.Provider, Label: a.delegated.Label}
}

// oneShotDone reports whether a one-shot child's turn has ended: the
// child then disposes itself.
func (a *agentLoop) oneShotDone() bool {
	return a.delegated != nil && a.turn == nil && a.delegatedEnd != nil
}

// jsonString quotes s as JSON.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// reportApprovals makes a one-shot child whose approval policy is ask tell
// its parent its pending approvals whenever they change
// (SignalSubagentApprovals), so the parent's LoopState lists them.
func (a *agentLoop) reportApprovals() {
	p := workflow.GetInfo(a.ctx).ParentWorkflowExecution
	if p == nil || a.delegated == nil || a.delegated.ApprovalPolicy != wire.ApprovalAsk {
		return
	}
	workflow.Go(a.dctx, func(ctx workflow.Context) {
		last := ""
		for {
			var cur []wire.PendingApproval
			var key string
			if err := workflow.Await(ctx, func() bool {
				cur = a.pendingApprovals()
				key = approvalsKey(cur)
				return key != last
			}); err != nil {
				return
			}
			last = key
			if cur == nil {
				cur = []wire.PendingApproval{}
			}
			// A parent that is gone has no one to tell.
			_ = workflow.SignalExternalWorkflow(ctx, p.ID, "", wire.SignalSubagentApprovals,
				wire.SubagentApprovals{ChildSessionID: a.id, Approvals: cur}).Get(ctx, nil)
		}
	})
}

// approvalsKey identifies a set of pending approvals.
func approvalsKey(ps []wire.PendingApproval) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.ID)
		b.WriteByte(0)
	}
	return b.String()
}

// watchChildApprovals receives the pending approvals the running turn's
// children report (reportApprovals); a report from a child the turn does
// not run is dropped.
func (a *agentLoop) watchChildApprovals() {
	ch := workflow.GetSignalChannel(a.ctx, wire.SignalSubagentApprovals)
	workflow.Go(a.dctx, func(ctx workflow.Context) {
		for {
			var s wire.SubagentApprovals
			ch.Receive(ctx, &s)
			if t := a.turn; t != nil && slices.ContainsFunc(t.calls, func(c wire.CallState) bool { return c.ChildSessionID == s.ChildSessionID && s.ChildSessionID != "" }) {
				if a.childApprovals == nil {
					a.childApprovals = map[string][]wire.PendingApproval{}
				}
				a.childApprovals[s.ChildSessionID] = s.Approvals
			}
		}
	})
}

// childPending lists the running children's pending approvals, by child
// session id, each naming its session.
func (a *agentLoop) childPending() []wire.PendingApproval {
	ids := make([]string, 0, len(a.childApprovals))
	for id := range a.childApprovals {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []wire.PendingApproval
	for _, id := range ids {
		for _, p := range a.childApprovals[id] {
			p.SessionID = id
			out = append(out, p)
		}
	}
	return out
}
