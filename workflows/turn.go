package workflows

import (
	"errors"
	"reflect"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/internal/lib/wftrace"
	"github.com/sessionflow/sessionflow/wire"
)

// The agent loop of a live session (docs/LIFECYCLE.md, Turns). A turn runs
// in the live phase's main coroutine: turn/start, then steps (step/start,
// the inputs the step claims as user/message events, the model activity,
// the tool activities of its tool calls), then turn/end. The workflow
// stores the events it builds itself (turn/start, step/start,
// user/message, step/end between steps, inbox splices) with AppendBatch at
// explicit seqs; the agent activities store what they produce and report
// the log's next seq, which the workflow follows. Nothing proportional to
// the conversation travels through history beyond the claimed inputs.

// errTypeProviderRefused is the type of the model activity's error for a
// call the provider refused: the turn ends "error".
const errTypeProviderRefused = wire.ErrTypeProviderRefused

// modelHeartbeatTimeout bounds the model activity's heartbeat timeout: a
// cancel reaches a heartbeating activity within about 80% of it, and a
// Cancel answers once the interrupted call has stored what it showed.
const modelHeartbeatTimeout = 3 * time.Second

// codeUnknown is the code of a turn error that is not a provider's.
const codeUnknown = "UNKNOWN"

// agentLoop is the agent loop of a live session: its options (the model
// route and limits), its inbox of pending inputs, the running turn, the
// recent turns and the waits for them, and the requests of its updates
// decoded by their validators. Only its methods write its fields (the
// inbox's and the running turn's own, theirs).
type agentLoop struct {
	*env
	// log is the stored log the turns append to; phase and appends are
	// read (an idle Inject is stored as an append).
	log     *storedLog
	phase   *phaseState
	appends *appendQueue

	agentOptions *wire.AgentOptions
	inbox        inbox
	turn         *turnRun
	recent       []wire.TurnInfo
	// waiters counts the running WaitTurn waits (and waiting inputs);
	// releaseWaiters answers those of a turn not running, before
	// continue-as-new.
	waiters        int
	releaseWaiters bool

	// inputs, cancels and waits hold the requests of the input, Cancel and
	// WaitTurn updates their validators decoded (decodedRequests).
	inputs      decodedRequests[admittedInput]
	cancels     decodedRequests[wire.CancelRequest]
	waits       decodedRequests[wire.WaitTurnRequest]
	compactReqs decodedRequests[wire.CompactRequest]

	// manual are the Compact requests waiting to run, in order;
	// compacting is the one running.
	manual     []*manualCompaction
	compacting *manualCompaction
	// compactingNow is the trigger of the Compact activities running.
	compactingNow string

	// perm are the session's permissions; settled the approvals decided
	// lately; decideReqs and permReqs the requests of the Decide and
	// SetPermissions updates their validators decoded.
	perm wire.Permissions
	pins []pinEvent
	// parked is the turn this run parked to continue as new; resumeParked
	// the one the run before parked, to go on with; canDue is the
	// lifecycle's continue-as-new test.
	parked       *ParkedTurn
	resumeParked *ParkedTurn
	canDue       func() bool
	settled      []SettledApproval
	decideReqs   decodedRequests[wire.DecideRequest]
	permReqs     decodedRequests[wire.SetPermissionsRequest]

	// delegated is the task of a one-shot child (subagent.go);
	// delegatedEnd how its turn ended, once it has.
	delegated    *wire.SubagentTask
	delegatedEnd *wire.SubagentEnd
	// childApprovals are the pending approvals the running turn's
	// children reported, by child session id.
	childApprovals map[string][]wire.PendingApproval
}

// turnRun is the running turn: its steps, the calls of the running step,
// its cancellation and its span. Only its methods write its fields.
type turnRun struct {
	a       *agentLoop
	summary wire.TurnInfo
	step    int64
	// cause is the cancel's cause once the turn is cancelled.
	cause string
	// cancel cancels the model activity; cancelCh wakes the tool pool.
	cancel   workflow.CancelFunc
	cancelCh workflow.Channel
	done     bool
	// span is the turn's trace span (nil when not traced).
	span *wftrace.WorkflowSpan
	// calls are the running step's tool calls; waiting those of them
	// waiting for their approval (or decided, not yet run); decideCh
	// wakes the tool pool when one is decided.
	calls    []wire.CallState
	waiting  []*waitingCall
	decideCh workflow.Channel
	// parked is the model result of the step a parked turn goes on
	// with; parking is set once the turn parks; reason its end reason so
	// far then; predecided the decisions its approvals got while parked;
	// asked the approvals it had, by call id.
	parked      *agent.ModelResult
	parking     bool
	reasonSoFar *wire.TurnEndReason
	predecided  map[string]*agent.ToolDecision
	asked       map[string]wire.PendingApproval
	// fresh are the running step's calls whose tool/call the model call
	// stored (modelRecordsCallsChange) and that no RunTool was started
	// for yet: each one's first dispatch tells its RunTool
	// (agent.ToolInput.Recorded). They are the calls the step starts at
	// once, all dispatched before the step can park; a parked turn's
	// next run has none, so its RunTools take every recorded call as
	// maybe run.
	fresh map[string]bool
	// noPressure is set once a compaction under pressure failed: the
	// turn's later steps are not measured again.
	noPressure bool
}

// llmFailure is the error of a turn that ended "error".
type llmFailure struct {
	Message string `json:"message"`
	Code    string `json:"code"`
	Status  int    `json:"status,omitempty"`
}

// agentTurns reports whether this run takes the agent loop's command
// paths (the agent-turns version), recording the marker the first time.
func (a *agentLoop) agentTurns() bool {
	return a.gates.taken(a.dctx, agentTurnsChange)
}

// setOptions sets the agent's options (create and resume) and its
// permissions: the options', else those the log records (logged), else
// the defaults. The permission facts the options change are stored with
// the setup events (pins).
//
// defaults are the worker's permission defaults as the create's or the
// resume's handle activity reported them (recorded in history); a run
// that predates them (workerDefaultsChange, asked only when they change
// the permissions) ignores them.
func (a *agentLoop) setOptions(o *wire.AgentOptions, logged *activities.LoggedPermissions, defaults *activities.PermissionDefaults) error {
	if err := a.admitPreset(o); err != nil {
		return err
	}
	a.agentOptions = o
	a.perm, a.pins = resolvePermissions(o, logged, nil, a.presetOf)
	if defaults != nil {
		perm, pins := resolvePermissions(o, logged, defaults, a.presetOf)
		if !samePermissions(perm, a.perm) || !slices.EqualFunc(pins, a.pins, samePin) {
			if a.gates.taken(a.dctx, workerDefaultsChange) {
				a.perm, a.pins = perm, pins
			}
		}
	}
	return nil
}

// samePermissions reports whether p and q are equal.
func samePermissions(p, q wire.Permissions) bool {
	r, s := p.Rules, q.Rules
	p.Rules, q.Rules = nil, nil
	return reflect.DeepEqual(p, q) && slices.Equal(r, s)
}

// samePin reports whether two pins store the same event.
func samePin(p, q pinEvent) bool {
	if p.typ != q.typ {
		return false
	}
	return reflect.DeepEqual(p.data, q.data)
}

// restore takes the loop of the run before continue-as-new.
func (a *agentLoop) restore(state LiveState) {
	a.agentOptions = state.AgentOptions
	a.settled = slices.Clone(state.Settled)
	a.resumeParked = state.Parked
	if state.Permissions != nil {
		a.perm = *state.Permissions
	} else {
		a.perm, _ = resolvePermissions(state.AgentOptions, nil, nil, a.presetOf)
	}
	a.inbox.restore(state.Inbox)
	a.recent = slices.Clone(state.RecentTurns)
	a.delegated = state.Delegated
}

// seedRecent starts a resumed session's recent turns with the log's latest
// ended turn, t (nil when the log has none).
func (a *agentLoop) seedRecent(t *wire.TurnInfo) {
	if t == nil || len(a.recent) > 0 {
		return
	}
	info := *t
	if info.Claimed == nil {
		info.Claimed = []string{}
	}
	a.recent = []wire.TurnInfo{info}
}

// state is the loop as carried across continue-as-new: the inbox and the
// recent turns.
func (a *agentLoop) state() (*InboxState, []wire.TurnInfo) {
	return a.inbox.state(), slices.Clone(a.recent)
}

// turnDue reports whether a turn should start: a waking input is pending
// and no accepted append waits to be stored before it.
func (a *agentLoop) turnDue() bool {
	if a.parked != nil {
		return false
	}
	return a.turn == nil && (a.inbox.wake || a.resumeParked != nil) && !a.appends.waiting() && !a.phase.disposeWanted && a.phase.phase == wire.PhaseLive
}

// releaseDue reports whether WaitTurn waits are not yet answered: the run
// answers them (releaseWaits) before it continues as new.
func (a *agentLoop) releaseDue() bool {
	return a.waiters > 0 && !a.releaseWaiters
}

// releaseWaits answers the waits for a turn still to come with
// TurnWaitMoved: their clients send them again, to the next run.
func (a *agentLoop) releaseWaits() {
	a.releaseWaiters = true
}

func maxSteps(o *wire.AgentOptions) int64 {
	if o != nil && o.MaxSteps != nil {
		return int64(*o.MaxSteps)
	}
	return wire.DefaultMaxSteps
}

func maxParallelToolCalls(o *wire.AgentOptions) int {
	if o != nil && o.MaxParallelToolCalls != nil {
		return int(min(*o.MaxParallelToolCalls, 1<<20))
	}
	return wire.DefaultMaxParallelToolCalls
}

// cancelTurn cancels the running turn, if any, with cause.
func (a *agentLoop) cancelTurn(cause string) {
	if a.turn != nil {
		a.turn.cancelWith(cause)
	}
}

// cancelWith cancels t with cause, once.
func (t *turnRun) cancelWith(cause string) {
	if t.done || t.cause != "" {
		return
	}
	t.cause = cause
	t.cancel()
	t.cancelCh.SendAsync(true)
}

// runTurn runs one turn to its end. A storage failure of the workflow's own
// events or of EndTurn disposes the session.
func (a *agentLoop) runTurn() {
	p := a.resumeParked
	a.resumeParked = nil
	if p == nil && (a.inbox.len() == 0 || !a.agentTurns()) {
		a.inbox.setWake(false)
		return
	}
	if p == nil {
		a.inbox.setWake(false)
	}
	a.releaseWaiters = false
	tctx, cancel := workflow.WithCancel(a.dctx)
	t := &turnRun{
		a:        a,
		summary:  wire.TurnInfo{Turn: a.log.lastTurn + 1, StartSeq: a.log.nextSeq, Claimed: []string{}},
		cancel:   cancel,
		cancelCh: workflow.NewBufferedChannel(a.dctx, 1),
		decideCh: workflow.NewBufferedChannel(a.dctx, 1),
	}
	if p != nil {
		// The turn the run before parked: it goes on from its calls.
		res := p.Result
		t.summary, t.step, t.parked, t.reasonSoFar, t.noPressure = p.Summary, p.Step, &res, p.Reason, p.NoPressure
		t.predecided = p.Decided
		t.asked = map[string]wire.PendingApproval{}
		for _, w := range p.Waiting {
			t.asked[w.CallID] = w
		}
	}
	tctx = t.startSpan(tctx)
	a.turn = t
	a.showDetails()
	reason := t.run(tctx)
	if t.parking {
		// Parked: the run continues as new, and the next one goes on.
		a.turn = nil
		return
	}
	t.end(reason)
	a.turn = nil
	a.childApprovals = nil
	if a.delegated != nil && a.delegatedEnd == nil {
		a.delegatedEnd = &wire.SubagentEnd{Turn: t.summary.Turn, Reason: reason}
	}
	a.recent = append(a.recent, t.summary)
	if n := len(a.recent); n > recentTurns {
		a.recent = slices.Clone(a.recent[n-recentTurns:])
	}
	a.showDetails()
	if reason.Kind != wire.TurnEndAborted {
		// Inputs that arrived during the turn start the next one; after
		// a cancel only a waking input sent since does.
		a.inbox.setWake(a.inbox.len() > 0)
	}
}

// run runs the turn's steps and ends it (EndTurn), and returns how it
// ended. A storage failure of the workflow's own events or of EndTurn asks
// for the session's disposal.
func (t *turnRun) run(tctx workflow.Context) wire.TurnEndReason {
	a := t.a
	var (
		end    agent.EndTurnInput
		err    error
		resume *wire.TurnEndReason
	)
	for {
		end, err = t.steps(tctx, resume)
		resume = nil
		if errors.Is(err, errParked) {
			return wire.TurnEndReason{}
		}
		var ended *turnEndedHeld
		if errors.As(err, &ended) {
			// An earlier attempt of the workflow task stored the turn's end.
			end.Reason, err = ended.reason, nil
			break
		}
		if err != nil {
			break
		}
		if t.localStores() {
			end.ExpectSeq = a.log.nextSeq
		}
		var res agent.EndTurnResult
		err = unwrapActivity(t.store(t.span.Context(a.dctx), wire.EndTurnActivity, turnLabel(t.summary.Turn)+" · end turn ("+end.Reason.Kind+")", end).Get(a.dctx, &res))
		if err == nil && len(res.Held) > 0 {
			// An earlier attempt opened the next step: the turn goes on.
			if err = t.adoptNextStep(end.Step, res); err == nil {
				reason := end.Reason
				resume = &reason
				continue
			}
		}
		if err == nil {
			a.log.follow(res.NextSeq)
		}
		break
	}
	if err != nil {
		workflow.GetLogger(a.ctx).Error("turn failed to store; disposing the session", "session", a.id, "turn", t.summary.Turn, "error", errorMessage(err))
		end.Reason = wire.TurnEndReason{Kind: TurnEndStoreFailed}
		a.phase.requestDispose()
	}
	return end.Reason
}

// end records the turn's end: its summary, and its span's end.
func (t *turnRun) end(reason wire.TurnEndReason) {
	t.endSpan(reason)
	t.summary.Reason = &reason
	t.summary.EndSeq = t.a.log.nextSeq
	t.summary.Steps = t.step
	t.done = true
}

// TurnEndStoreFailed is the reason LoopState reports for a turn whose
// events could not be stored; its turn/end is not stored (the session is
// disposed, and a resume closes the turn as interrupted).
const TurnEndStoreFailed = "store-failed"

// errParked is how a turn's steps return once the turn has parked.
var errParked = errors.New("the turn parked its calls waiting for approvals")
