package workflows

import (
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/internal/lib/wftrace"
	"github.com/sessionflow/sessionflow/wire"
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

// startSpan starts the span of turn t and returns tctx under it. Its
// parent is the trace context of the input the turn starts with.
func (t *turnRun) startSpan(tctx workflow.Context) workflow.Context {
	a := t.a
	var provider, model string
	if o := a.agentOptions; o != nil {
		provider, model = o.Provider, o.Model
	}
	tctx, t.span = wftrace.StartWorkflowSpan(tctx, turnSpanName, "turn/"+strconv.FormatInt(t.summary.Turn, 10),
		a.inbox.traceParent(), workflow.Now(a.dctx),
		attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("gen_ai.agent.name", "sessionflow"),
		attribute.String("gen_ai.conversation.id", a.id),
		attribute.String("gen_ai.provider.name", provider),
		attribute.String("gen_ai.request.model", model),
		attribute.Int64(attrTurn, t.summary.Turn),
	)
	return tctx
}

// endSpan ends the span of turn t with its end reason.
func (t *turnRun) endSpan(reason wire.TurnEndReason) {
	errText := ""
	if reason.Kind == wire.TurnEndError || reason.Kind == TurnEndStoreFailed {
		errText = "turn ended " + reason.Kind
	}
	t.span.End(t.a.dctx, workflow.Now(t.a.dctx), errText,
		attribute.String(attrTurnEnd, reason.Kind),
		attribute.Int64(attrTurnSteps, t.step))
}
