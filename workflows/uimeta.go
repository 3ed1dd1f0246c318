package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/wire"
)

// What a session's run shows in the Temporal UI (docs/API.md, Temporal
// UI): its current details (workflow.SetCurrentDetails, read by the UI and
// `temporal workflow metadata` through the SDK's metadata query) and each
// activity's summary (ActivityOptions.Summary, kept in the history as the
// command's user metadata). Both are user metadata: a replay compares
// neither, so they change no command and need no version gate; the static
// summary and details are set by whoever starts the workflow
// (wire.CreateSummary).

// uiState is the run's latest activity summary and how its current details
// are rendered; only env's methods write it.
type uiState struct {
	activity string
	render   func(activity string) string
}

// showDetails sets the run's current details from its state now.
func (e *env) showDetails() {
	if e.ui == nil || e.ui.render == nil {
		return
	}
	workflow.SetCurrentDetails(e.ctx, e.ui.render(e.ui.activity))
}

// act returns ctx, which carries activity options, with the activity
// summary s, and shows s as the run's latest activity.
func (e *env) act(ctx workflow.Context, s string) workflow.Context {
	o := workflow.GetActivityOptions(ctx)
	o.Summary = s
	e.noteActivity(s)
	return workflow.WithActivityOptions(ctx, o)
}

// actLocal is act for a context carrying local activity options.
func (e *env) actLocal(ctx workflow.Context, s string) workflow.Context {
	o := workflow.GetLocalActivityOptions(ctx)
	o.Summary = s
	e.noteActivity(s)
	return workflow.WithLocalActivityOptions(ctx, o)
}

func (e *env) noteActivity(s string) {
	if e.ui == nil {
		e.ui = &uiState{}
	}
	e.ui.activity = s
	e.showDetails()
}

// turnLabel is the prefix of a turn's activity summaries: "turn 12".
func turnLabel(turn int64) string { return fmt.Sprintf("turn %d", turn) }

// eventsLabel is "append 1 event", "append 3 events".
func eventsLabel(n int) string {
	if n == 1 {
		return "append 1 event"
	}
	return fmt.Sprintf("append %d events", n)
}

// compactLabel is the summary of a compaction's activity: "turn 12 ·
// compact (pressure)", or "compact (manual)" between turns.
func compactLabel(turn int64, trigger string) string {
	s := "compact (" + wire.SummaryName(trigger) + ")"
	if turn > 0 {
		s = turnLabel(turn) + " · " + s
	}
	return s
}

// toolLabel is a tool call's summary: its name and, when the model result
// gave one, a short hint of its arguments ("run_command go test").
func toolLabel(name, hint string) string {
	s := wire.SummaryName(name)
	if hint != "" {
		s += " " + wire.SummaryName(hint)
	}
	return s
}

// currentDetails renders the run's current details: the phase and what
// the agent does, the session's cwd and route, the turn count and the
// latest activity.
func (l *lifecycle) currentDetails(activity string) string {
	var b strings.Builder
	state := string(l.phase.phase)
	switch {
	case l.phase.phase == wire.PhaseLive && l.phase.disposeWanted:
		state += " · disposing"
	case l.agent.turn != nil:
		state += fmt.Sprintf(" · running turn %d, step %d", l.agent.turn.summary.Turn, l.agent.turn.step)
	case l.phase.phase == wire.PhaseLive:
		state += " · idle"
	}
	turns := fmt.Sprintf("%d turns", l.log.lastTurn)
	if l.log.lastTurn == 1 {
		turns = "1 turn"
	}
	fmt.Fprintf(&b, "**%s** · %s · next seq %d\n", state, turns, l.log.nextSeq)
	fmt.Fprintf(&b, "**session** %s · **source** %s", wire.SummaryName(l.id), l.source)
	if cwd := l.log.header.Cwd; cwd != "" {
		fmt.Fprintf(&b, " · **cwd** %s", wire.SummaryName(cwd))
	}
	if o := l.agent.agentOptions; o != nil && (o.Provider != "" || o.Model != "") {
		fmt.Fprintf(&b, " · **model** %s/%s", wire.SummaryName(o.Provider), wire.SummaryName(o.Model))
	}
	if n := l.agent.inbox.len(); n > 0 {
		fmt.Fprintf(&b, "\n**pending inputs** %d", n)
	}
	if activity != "" {
		fmt.Fprintf(&b, "\n**latest activity** %s", activity)
	}
	return b.String()
}
