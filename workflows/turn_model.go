package workflows

import (
	"encoding/json"
	"errors"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

func abortedReason(cause string) *session.TurnEndReason {
	r, _ := session.MarshalData(map[string]string{"kind": cause})
	return &session.TurnEndReason{Kind: session.TurnEndAborted, Reason: r}
}

func failureJSON(f llmFailure) json.RawMessage {
	b, _ := session.MarshalData(f)
	return b
}

// modelCtx returns ctx with the model activity's options: it heartbeats
// while streaming and is waited for when cancelled, so its interrupted
// anchor is stored before the turn ends. A refused call is not retried.
func (s settings) modelCtx(ctx workflow.Context) workflow.Context {
	rp := s.retry()
	rp.NonRetryableErrorTypes = append(rp.NonRetryableErrorTypes, errTypeProviderRefused)
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           s.taskQueue,
		StartToCloseTimeout: s.timeout,
		HeartbeatTimeout:    min(s.heartbeat, modelHeartbeatTimeout),
		WaitForCancellation: true,
		RetryPolicy:         rp,
	})
}

// callModel runs the model activity of the turn's step.
func (t *turnRun) callModel(tctx workflow.Context, step int64) (agent.ModelResult, error) {
	a := t.a
	in := agent.ModelInput{Ref: *a.log.ref, Turn: t.summary.Turn, Step: step}
	if o := a.agentOptions; o != nil {
		in.Provider, in.Model, in.ReasoningEffort = o.Provider, o.Model, o.ReasoningEffort
		if o.MaxTokens != nil {
			in.MaxTokens = int64(*o.MaxTokens)
		}
	}
	var res agent.ModelResult
	err := workflow.ExecuteActivity(a.set.modelCtx(tctx), agent.CallModelActivity, in).Get(a.dctx, &res)
	return res, err
}

// modelFailure is the end of a turn whose model activity failed: aborted
// when the turn was cancelled, else error: the provider's message and code
// for a refused call; else the activity error's type as the code, UNKNOWN
// when it has none (a timeout).
func (t *turnRun) modelFailure(err error) *session.TurnEndReason {
	if t.cause != "" || temporal.IsCanceledError(err) {
		cause := t.cause
		if cause == "" {
			cause = CauseUser
		}
		return abortedReason(cause)
	}
	err = unwrapActivity(err)
	f := activityFailure(err)
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() == errTypeProviderRefused {
		var pe provider.Error
		if app.HasDetails() && app.Details(&pe) == nil {
			if pe.Message != "" {
				f.Message = pe.Message
			}
			f.Code, f.Status = pe.Code, pe.Status
		}
		if f.Code == "" {
			f.Code = errTypeProviderRefused
		}
	}
	return &session.TurnEndReason{Kind: session.TurnEndError, Error: failureJSON(f)}
}

// activityFailure describes a failed activity: its message, and its
// application error type (UnknownProvider, ProviderUnavailable after the
// last attempt, a store code, ...) as the code, UNKNOWN without one (a
// timeout).
func activityFailure(err error) llmFailure {
	err = unwrapActivity(err)
	f := llmFailure{Message: errorMessage(err), Code: codeUnknown}
	if t := errorType(err); t != "" {
		f.Code = t
	}
	return f
}
