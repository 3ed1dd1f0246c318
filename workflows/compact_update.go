package workflows

import (
	"fmt"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// A manual compaction (the Compact update, docs/API.md "Compaction") runs
// between turns in the live phase's main coroutine, as a turn does: sent
// while a turn runs it waits for the turn's end, and runs before the next
// turn. It is recorded as the harness records its /compact command:
// command/run, the standalone compaction brackets (turn null), then
// command/done with the outcome in the harness's words.

// Texts of command/done (the harness's /compact command).
const (
	compactNothingText   = "No compactable history yet."
	compactSummaryText   = "Compaction could not produce a useful summary. The conversation is unchanged; the attempt is recorded in the session log."
	compactCancelledText = "Compaction cancelled."
)

// manualCompaction is a Compact request waiting or running.
type manualCompaction struct {
	commandID string
	cancel    workflow.CancelFunc
	cancelled bool
	done      bool
	result    wire.CompactResult
}

// commandRun and commandDone are the data of the command/* pair.
type commandRun struct {
	CommandID string        `json:"commandId"`
	Name      string        `json:"name"`
	Args      string        `json:"args"`
	Source    commandSource `json:"source"`
}

type commandSource struct {
	Kind string `json:"kind"`
}

type commandDone struct {
	CommandID      string `json:"commandId"`
	Kind           string `json:"kind"`
	Text           string `json:"text,omitempty"`
	SourceEventSeq *int64 `json:"sourceEventSeq,omitempty"`
}

// validateCompact accepts a Compact of a live session whose agent has a
// route, and keeps the request for the handler.
func (a *agentLoop) validateCompact(ctx workflow.Context, in converter.RawValue) error {
	if err := a.phase.admit(); err != nil {
		return err
	}
	var req wire.CompactRequest
	if err := decodeRequest(wire.UpdateCompact, in, &req); err != nil {
		return err
	}
	if req.CommandID == "" {
		req.CommandID = workflow.GetCurrentUpdateInfo(ctx).ID
	}
	if err := wire.ValidateID(req.CommandID); err != nil {
		return invalidArgument("Compact: commandId: " + err.Error())
	}
	if o := a.agentOptions; o == nil || o.Provider == "" || o.Model == "" {
		return temporal.NewNonRetryableApplicationError("Compact: the session's agent has no model route (agentOptions provider and model)", wire.ErrTypeNoRoute, nil)
	}
	a.compactReqs.keep(ctx, req)
	return nil
}

// handleCompact queues the compaction and answers once it has ended.
func (a *agentLoop) handleCompact(ctx workflow.Context, in converter.RawValue) (wire.CompactResult, error) {
	req, err := a.compactReqs.take(ctx, wire.UpdateCompact, in)
	if err != nil {
		return wire.CompactResult{}, err
	}
	if req.CommandID == "" {
		req.CommandID = workflow.GetCurrentUpdateInfo(ctx).ID
	}
	m := &manualCompaction{commandID: req.CommandID}
	a.manual = append(a.manual, m)
	hctx, _ := workflow.NewDisconnectedContext(ctx)
	if err := workflow.Await(hctx, func() bool { return m.done }); err != nil {
		return wire.CompactResult{}, err
	}
	return m.result, nil
}

// compactDue reports whether a manual compaction should run now: one is
// queued and no turn runs.
func (a *agentLoop) compactDue() bool {
	return a.turn == nil && len(a.manual) > 0 && !a.appends.waiting() && !a.phase.disposeWanted && a.phase.phase == wire.PhaseLive
}

// abandonCompactions answers the queued compactions that will not run (the
// session is disposed).
func (a *agentLoop) abandonCompactions(reason string) {
	for _, m := range a.manual {
		m.result = wire.CompactResult{CommandID: m.commandID, Error: reason, Text: reason}
		m.done = true
	}
	a.manual = nil
}

// cancelCompaction cancels the running manual compaction, if any.
func (a *agentLoop) cancelCompaction() bool {
	if a.compacting == nil || a.compacting.cancelled {
		return false
	}
	a.compacting.cancelled = true
	a.compacting.cancel()
	return true
}

// runCompaction runs the first queued manual compaction to its end. A
// storage failure of its command events disposes the session.
func (a *agentLoop) runCompaction() {
	m := a.manual[0]
	a.manual = a.manual[1:]
	defer func() { m.done = true }()
	if !a.gates.taken(a.dctx, compactionChange) {
		m.result = wire.CompactResult{CommandID: m.commandID, Error: "compaction is not available to this run"}
		return
	}
	cctx, cancel := workflow.WithCancel(a.dctx)
	m.cancel = cancel
	a.compacting = m
	defer func() { a.compacting = nil }()
	run := commandRun{CommandID: m.commandID, Name: "compact", Args: "", Source: commandSource{Kind: "user"}}
	if err := a.storeEvents(wire.TypeCommandRun, run); err != nil {
		a.storeFailed(m, err)
		return
	}
	last, progressed := a.compactions(cctx, 0, agent.TriggerManual, m.commandID, func() bool { return m.cancelled })
	res := wire.CompactResult{CommandID: m.commandID, CompactionID: last.CompactionID, Pruned: last.Pruned, Tokens: last.Tokens, Window: last.Window}
	done := commandDone{CommandID: m.commandID, Kind: "success"}
	switch {
	case m.cancelled:
		done.Kind, done.Text, res.Error = "error", compactCancelledText, compactCancelledText
	case last.Error != "":
		done.Kind, done.Text, res.Error = "error", compactSummaryText, last.Error
	case last.SummarySeq >= 0:
		res.Compacted = true
		res.Shadowed, res.ShadowedTokens = last.Shadowed, last.ShadowedTokens
		seq := last.SummarySeq
		done.SourceEventSeq = &seq
		done.Text = fmt.Sprintf("Compacted %d history items (~%d tokens).", res.Shadowed, res.ShadowedTokens)
	case progressed:
		done.Text = fmt.Sprintf("Pruned %d tool results.", last.Pruned)
	default:
		done.Text = compactNothingText
	}
	res.Text = done.Text
	if err := a.storeEvents(wire.TypeCommandDone, done); err != nil {
		a.storeFailed(m, err)
		return
	}
	m.result = res
}

// storeFailed answers m with a storage failure and asks for the session's
// disposal.
func (a *agentLoop) storeFailed(m *manualCompaction, err error) {
	workflow.GetLogger(a.ctx).Error("manual compaction failed to store; disposing the session", "session", a.id, "error", errorMessage(err))
	m.result = wire.CompactResult{CommandID: m.commandID, Error: errorMessage(err)}
	a.phase.requestDispose()
}

// storeEvents stores one workflow-built event of type typ at the log's
// next seq.
func (a *agentLoop) storeEvents(typ string, data any) error {
	e, err := session.NewEvent(typ, a.log.nextSeq, workflow.Now(a.dctx).UnixMilli(), data)
	if err != nil {
		return err
	}
	events := []session.Event{e}
	var res activities.AppendResult
	err = workflow.ExecuteActivity(a.act(a.set.storeCtx(a.dctx), typ+" · "+eventsLabel(len(events))), wire.AppendBatchName,
		activities.AppendBatchInput{Ref: *a.log.ref, Events: events}).Get(a.dctx, &res)
	if err != nil {
		return unwrapActivity(err)
	}
	a.log.stored(res.NextSeq, events)
	return nil
}
