package agent

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/tool"
	"github.com/sessionflow/sessionflow/wire"
)

// ProgressWindow bounds the text of a ModelProgress heartbeat: the last
// ProgressWindow bytes of the shown text.
const ProgressWindow = 4 << 10

// ToolSet is what the activities need of a tool registry: *tool.Registry
// (a worker's registry of its tools, built-ins included).
type ToolSet interface {
	// Lookup returns the tool called name.
	Lookup(name string) (tool.Tool, bool)
	// Specs are the tools offered to the model.
	Specs() []provider.Tool
	// Execute runs a call; a failure is an IsError result, never an error.
	Execute(ctx context.Context, name string, call tool.Call) tool.Result
}

var _ ToolSet = (*tool.Registry)(nil)

// Activities are the agent's store-backed activities: CallModel, RunTool,
// EndTurn, CloseCalls and Compact. Register a pointer with a worker; the
// method names are the activity names (CallModelActivity, RunToolActivity,
// EndTurnActivity, CloseCallsActivity, CompactActivity). The steps of one model call are a
// modelCall's, those of one tool call a toolCall's.
type Activities struct {
	// Runtime holds the store and the heartbeat the activities share with
	// the store activities. A nil Runtime, or one without a store, makes
	// every activity fail with activities.ErrTypePersistenceNotConfigured.
	Runtime *activities.Runtime
	// Providers are the model providers the worker offers.
	Providers provider.Set
	// Tools are the tools offered to the model; nil offers none.
	Tools ToolSet
	// System is the system prompt of every model call.
	System string
	// Now is the clock of stored events' times; nil means time.Now.
	Now func() time.Time
	// TracerProvider provides the tracer of the model and tool call spans;
	// nil means otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// TraceContent records prompts, responses, tool arguments and results
	// on the spans (gen_ai.input.messages, gen_ai.output.messages,
	// gen_ai.tool.call.arguments, gen_ai.tool.call.result); off by default.
	TraceContent bool
	// Limits bound each model call (idle gap, total time, output size);
	// zero fields take their defaults (ModelLimits).
	Limits ModelLimits
	// NoLiveText turns off the live text files of the model calls
	// (package livetext); the heartbeat details still carry the progress.
	NoLiveText bool
	// Compaction tunes compaction (context windows, threshold, tail,
	// summary cap, pruning); zero fields take their defaults.
	Compaction CompactionSettings
	// RuntimeContext stores the harness's runtime-context snapshot (the
	// file policy and the approval policy, ModelInput.Policy) before a
	// model request whose log's surface does not hold it (FORMAT.md
	// §10.4); off by default (worker --runtime-context).
	RuntimeContext bool

	// conversations are the messages CallModel decoded, per session: these
	// activities' own, never another worker's (docs/DECISIONS.md D44, D84).
	conversations convCache
	// attemptOf, when set, replaces the activity's attempt number (tests).
	attemptOf func(context.Context) int32
}

// attempt is the attempt number of the running activity: 1 for its first
// execution, 0 outside an activity (a direct call, which proves nothing).
func (a *Activities) attempt(ctx context.Context) int32 {
	if a.attemptOf != nil {
		return a.attemptOf(ctx)
	}
	if !activity.IsActivity(ctx) {
		return 0
	}
	return activity.GetInfo(ctx).Attempt
}

// nowMs is the time of a stored event, in Unix milliseconds.
func (a *Activities) nowMs() int64 {
	if a.Now != nil {
		return a.Now().UnixMilli()
	}
	return time.Now().UnixMilli()
}

func (a *Activities) lookup(name string) (tool.Tool, bool) {
	if a.Tools == nil {
		return tool.Tool{}, false
	}
	return a.Tools.Lookup(name)
}

// invalidLog is the non-retryable error of an input that does not match
// the log.
func invalidLog(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), wire.ErrTypeInvalidLog, nil)
}
