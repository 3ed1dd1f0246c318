package workflows

import (
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/internal/lib/wftrace"
	"github.com/sessionflow/sessionflow/session"
)

// The span of a turn (docs/API.md, Tracing). It is started in workflow code
// with ids derived from the run and the turn number, so a worker that takes
// the session over after a crash names the same span, and the model and
// tool activities it schedules are its children wherever they run. Its
// parent is the trace context of the update that queued the turn's input
// (the Followup, or a Steer), carried in the update's Temporal header.
// Without a tracing interceptor on the worker nothing is traced.

// Span names and attributes of a turn, after the OpenTelemetry GenAI
// semantic conventions for agent spans.
const (
	turnSpanName  = "invoke_agent sessionflow"
	attrTurn      = "sessionflow.turn"
	attrTurnSteps = "sessionflow.turn.steps"
	attrTurnEnd   = "sessionflow.turn.end_reason"
)

// turnTraceParent is the trace context of the input a turn starts with:
// the first next-turn input's, else the first next-step input's.
func (l *lifecycle) turnTraceParent() wftrace.Carrier {
	b := &l.agent.inbox
	for _, q := range [][]PendingInput{b.nextTurn[:min(1, len(b.nextTurn))], b.nextStep} {
		for _, p := range q {
			if len(p.Trace) > 0 {
				return p.Trace
			}
		}
	}
	return nil
}

// startTurnSpan starts the span of turn t and returns tctx under it.
func (l *lifecycle) startTurnSpan(tctx workflow.Context, t *turnRun) workflow.Context {
	var provider, model string
	if o := l.agent.options; o != nil {
		provider, model = o.Provider, o.Model
	}
	tctx, t.span = wftrace.StartWorkflowSpan(tctx, turnSpanName, "turn/"+strconv.FormatInt(t.summary.Turn, 10),
		l.turnTraceParent(), workflow.Now(l.dctx),
		attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("gen_ai.agent.name", "sessionflow"),
		attribute.String("gen_ai.conversation.id", l.id),
		attribute.String("gen_ai.provider.name", provider),
		attribute.String("gen_ai.request.model", model),
		attribute.Int64(attrTurn, t.summary.Turn),
	)
	return tctx
}

// endTurnSpan ends the span of turn t with its end reason.
func (l *lifecycle) endTurnSpan(t *turnRun, reason session.TurnEndReason) {
	errText := ""
	if reason.Kind == session.TurnEndError || reason.Kind == TurnEndStoreFailed {
		errText = "turn ended " + reason.Kind
	}
	t.span.End(l.dctx, workflow.Now(l.dctx), errText,
		attribute.String(attrTurnEnd, reason.Kind),
		attribute.Int64(attrTurnSteps, t.step))
}

// turnTraced returns ctx under the running turn's span, if any.
func (l *lifecycle) turnTraced(ctx workflow.Context) workflow.Context {
	if t := l.agent.turn; t != nil {
		return t.span.Context(ctx)
	}
	return ctx
}
