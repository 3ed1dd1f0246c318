package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/tool"
)

// Names of the agent-sample baseline: the pattern of Temporal's agent
// samples (and of the OpenAI Agents SDK and Pydantic AI integrations), in
// which the workflow keeps the conversation in its state, passes it whole in
// the model activity's input and gets the response in its result.
const (
	// SampleWorkflowName is the agent-sample workflow.
	SampleWorkflowName = "bench.AgentSample"
	// SampleModelActivityName is its model activity.
	SampleModelActivityName = "bench.sampleModel"
	// SampleToolActivityName is its tool activity: one tool call.
	SampleToolActivityName = "bench.sampleTool"
	// SampleUpdateTurn runs one turn: the prompt is added to the
	// conversation, the model is called with the whole conversation, and the
	// response is added to it.
	SampleUpdateTurn = "turn"
	// SampleSignalDone ends an agent-sample workflow.
	SampleSignalDone = "done"
)

// SampleState is what the agent-sample workflow carries, also across
// continue-as-new: the route and the whole conversation.
type SampleState struct {
	// Provider and Model are the route of every model call.
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// Tools are the tools offered to the model, in every call's input.
	Tools []provider.Tool `json:"tools,omitempty"`
	// Messages is the conversation, oldest first.
	Messages []provider.Message `json:"messages"`
	// Runs counts the continue-as-new generations before this run.
	Runs int `json:"runs"`
}

// SampleTurnRequest is the input of the turn update.
type SampleTurnRequest struct {
	// Messages are added to the conversation before the prompt, without a
	// model call (pasted context, earlier exchanges): they let a run grow
	// its conversation faster than one exchange per turn.
	Messages []provider.Message `json:"messages,omitempty"`
	// Prompt is the user's message of the turn.
	Prompt string `json:"prompt"`
}

// SampleTurnResult is the result of the turn update.
type SampleTurnResult struct {
	// Messages is the conversation's length after the turn.
	Messages int `json:"messages"`
	// Finish is the model's finish reason.
	Finish provider.FinishReason `json:"finish"`
	// Runs is the run's continue-as-new generation.
	Runs int `json:"runs"`
}

// SampleModelInput is the input of the sample's model activity: the whole
// conversation.
type SampleModelInput struct {
	Provider string             `json:"provider"`
	Model    string             `json:"model"`
	Messages []provider.Message `json:"messages"`
	Tools    []provider.Tool    `json:"tools,omitempty"`
}

// SampleToolInput is the input of the sample's tool activity: one tool
// call of the model's response.
type SampleToolInput struct {
	CallID    string `json:"callId"`
	Name      string `json:"name"`
	Arguments string `json:"arguments,omitempty"`
}

// SampleModelResult is the result of the sample's model activity: the whole
// response.
type SampleModelResult struct {
	// Message is the assistant message the stream assembled.
	Message provider.Message `json:"message"`
	// Finish is the finish reason.
	Finish provider.FinishReason `json:"finish"`
	// Usage is the call's usage, when reported.
	Usage *provider.Usage `json:"usage,omitempty"`
}

// SampleActivities holds the providers the sample's model activity calls
// and the tools its tool activity runs.
type SampleActivities struct {
	Providers provider.Set
	Tools     *tool.Registry
}

// Model calls the provider with the conversation of its input and returns
// the assembled response.
func (a *SampleActivities) Model(ctx context.Context, in SampleModelInput) (SampleModelResult, error) {
	p, err := a.Providers.Get(in.Provider)
	if err != nil {
		return SampleModelResult{}, temporal.NewNonRetryableApplicationError(err.Error(), "ProviderRefused", err)
	}
	asm := provider.NewAssembler()
	for ch, err := range p.Stream(ctx, provider.Request{Provider: in.Provider, Model: in.Model, Messages: in.Messages, Tools: in.Tools}) {
		if err != nil {
			return SampleModelResult{}, fmt.Errorf("model call: %w", err)
		}
		if err := asm.Push(ch, time.Now().UnixMilli()); err != nil {
			return SampleModelResult{}, temporal.NewNonRetryableApplicationError(err.Error(), "ProviderRefused", err)
		}
	}
	return SampleModelResult{Message: provider.Message{Role: provider.RoleAssistant, Content: asm.Content()}, Finish: asm.Finish(), Usage: asm.Usage()}, nil
}

// Tool runs one tool call with the registry's tool and returns its
// tool-result block (a missing tool or bad arguments are an error result,
// as Registry.Execute makes them).
func (a *SampleActivities) Tool(ctx context.Context, in SampleToolInput) (provider.Block, error) {
	args := json.RawMessage(in.Arguments)
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	res := a.Tools.Execute(ctx, in.Name, tool.Call{CallID: in.CallID, Cwd: "/bench", Arguments: args})
	return provider.Block{Type: provider.BlockToolResult, ToolCallID: in.CallID, IsError: res.IsError, Content: res.Content}, nil
}

// RegisterSample registers the agent-sample workflow, its model activity
// calling providers and its tool activity running tools.
func RegisterSample(r worker.Registry, providers provider.Set, tools *tool.Registry) {
	r.RegisterWorkflowWithOptions(SampleWorkflow, workflow.RegisterOptions{Name: SampleWorkflowName})
	a := &SampleActivities{Providers: providers, Tools: tools}
	r.RegisterActivityWithOptions(a.Model, activity.RegisterOptions{Name: SampleModelActivityName})
	r.RegisterActivityWithOptions(a.Tool, activity.RegisterOptions{Name: SampleToolActivityName})
}

// sampleMaxSteps bounds the model calls of one turn of the sample.
const sampleMaxSteps = 16

// SampleWorkflow is the agent-sample pattern: the turn update adds the
// prompt to the conversation held in workflow state, runs the model
// activity with the whole conversation as its input, and adds the response
// (the activity's result) to the conversation. While the response calls
// tools (at most sampleMaxSteps model calls), it runs one tool activity
// per call, all at once, adds their results as one user message and calls
// the model again. The workflow continues as new, carrying the
// conversation, at the end of a turn during which the server suggested it,
// and ends on the done signal.
func SampleWorkflow(ctx workflow.Context, st SampleState) (int, error) {
	ao := workflow.ActivityOptions{
		StartToCloseTimeout: workflowTimeout,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	}
	busy, continueAsNew := false, false
	if err := workflow.SetUpdateHandler(ctx, SampleUpdateTurn, func(ctx workflow.Context, req SampleTurnRequest) (SampleTurnResult, error) {
		if err := workflow.Await(ctx, func() bool { return !busy }); err != nil {
			return SampleTurnResult{}, err
		}
		busy = true
		defer func() { busy = false }()
		st.Messages = append(st.Messages, req.Messages...)
		st.Messages = append(st.Messages, provider.Message{Role: provider.RoleUser, Content: []provider.Block{{Type: provider.BlockText, Text: req.Prompt}}})
		actx := workflow.WithActivityOptions(ctx, ao)
		var out SampleModelResult
		for step := 1; ; step++ {
			out = SampleModelResult{}
			if err := workflow.ExecuteActivity(actx, SampleModelActivityName, SampleModelInput{Provider: st.Provider, Model: st.Model, Messages: st.Messages, Tools: st.Tools}).Get(ctx, &out); err != nil {
				return SampleTurnResult{}, err
			}
			st.Messages = append(st.Messages, out.Message)
			var calls []provider.Block
			for _, b := range out.Message.Content {
				if b.Type == provider.BlockToolCall {
					calls = append(calls, b)
				}
			}
			if len(calls) == 0 || step >= sampleMaxSteps {
				break
			}
			fs := make([]workflow.Future, len(calls))
			for i, c := range calls {
				fs[i] = workflow.ExecuteActivity(actx, SampleToolActivityName, SampleToolInput{CallID: c.ID, Name: c.Name, Arguments: c.Arguments})
			}
			results := provider.Message{Role: provider.RoleUser}
			for _, f := range fs {
				var r provider.Block
				if err := f.Get(ctx, &r); err != nil {
					return SampleTurnResult{}, err
				}
				results.Content = append(results.Content, r)
			}
			st.Messages = append(st.Messages, results)
		}
		// Decided as the turn ends, so that the continue-as-new goes with
		// the update's completion and no next turn is accepted by this run.
		continueAsNew = workflow.GetInfo(ctx).GetContinueAsNewSuggested()
		return SampleTurnResult{Messages: len(st.Messages), Finish: out.Finish, Runs: st.Runs}, nil
	}); err != nil {
		return 0, err
	}
	done := false
	sig := workflow.GetSignalChannel(ctx, SampleSignalDone)
	workflow.Go(ctx, func(ctx workflow.Context) {
		sig.Receive(ctx, nil)
		done = true
	})
	if err := workflow.Await(ctx, func() bool {
		return done || (!busy && continueAsNew)
	}); err != nil {
		return 0, err
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return 0, err
	}
	if done {
		return len(st.Messages), nil
	}
	st.Runs++
	return 0, workflow.NewContinueAsNewError(ctx, SampleWorkflowName, st)
}

// sampleTimeout bounds one turn update of the sample.
const sampleTimeout = 60 * time.Second
