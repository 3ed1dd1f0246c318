package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sessionflow/sessionflow/wire"
)

// SubagentName is the model-facing name of the delegation tool, the
// harness's default (tool-subagent's toolName).
const SubagentName = wire.SubagentToolName

// DefaultSubagentMaxDepth is the deepest delegation the subagent tool
// starts by default: a child of depth 3 may not delegate again (the
// harness's maxDepth default).
const DefaultSubagentMaxDepth = 3

// Codes of the subagent tool's refusals.
const (
	CodeSubagentDepth      = "SUBAGENT_DEPTH"
	CodeSubagentBackground = "SUBAGENT_BACKGROUND_DISABLED"
	CodeSubagentNotHere    = "SUBAGENT_NOT_DELEGATED"
)

// Delegation is what a call of the subagent tool needs from, and gives
// to, the session that runs it: the calling session's delegation depth,
// and the child to start once the call is accepted.
type Delegation struct {
	// Depth is the calling session's delegation depth (0 for a top-level
	// session).
	Depth int64
	// Plan is set by the tool's Run when the call is accepted: the child
	// session's task.
	Plan *SubagentPlan
}

// SubagentPlan is an accepted delegation: the child's prompt, its display
// label and its depth.
type SubagentPlan struct {
	// Prompt is the child's first (and only) user message.
	Prompt string `json:"prompt"`
	// Label is the call's short description, the child's descriptor label.
	Label string `json:"label"`
	// Depth is the child's delegation depth: the caller's plus one.
	Depth int64 `json:"depth"`
}

// SubagentOptions configure the subagent tool.
type SubagentOptions struct {
	// MaxDepth is the deepest child the tool starts; 0 forbids delegation
	// (the tool stays visible and refuses every call). Negative means
	// DefaultSubagentMaxDepth.
	MaxDepth int
}

// subagentSchema is the harness's one-shot foreground parameter set
// (tool-subagent with enableRunInBackground false): the validator accepts
// undeclared keys, and run_in_background true is refused at execution.
const subagentSchema = `{"type":"object","properties":{` +
	`"description":{"type":"string","description":"A short (3-5 word) description of the delegated task, for display."},` +
	`"prompt":{"type":"string","description":"The complete, self-contained task for the subagent. It does not share this conversation's context, so include everything it needs."}` +
	`},"required":["description","prompt"]}`

// subagentDescription is the harness's wording for a spawn provider (a
// fresh child) without background runs.
const subagentDescription = "Delegate a self-contained task to a subagent (a separate agent that works in its own context) " +
	"to offload focused, independent work — research, a scoped implementation, an analysis — so it does not " +
	"consume this conversation's context. The subagent returns its result, not its intermediate steps. Give it a " +
	"complete, standalone prompt: it does not see this conversation. This call waits for the subagent and returns its result."

// Subagent returns the delegation tool: a call starts a one-shot child
// session (a child workflow of the calling session's) whose final answer
// is the call's result. The tool only plans the child: Run checks the
// arguments and the depth and sets call.Delegation.Plan; the session
// workflow starts the child and stores the result. A call without a
// Delegation (a caller that cannot start children) is refused with
// SUBAGENT_NOT_DELEGATED. Calls are parallel-safe: a step's calls run
// their children side by side.
func Subagent(opts SubagentOptions) Tool {
	maxDepth := opts.MaxDepth
	if maxDepth < 0 {
		maxDepth = DefaultSubagentMaxDepth
	}
	return Tool{
		Name:        SubagentName,
		Description: subagentDescription,
		Schema:      json.RawMessage(subagentSchema),
		Parallel:    true,
		Run: func(_ context.Context, call Call) (Result, error) {
			return planSubagent(call, int64(maxDepth)), nil
		},
	}
}

// planSubagent checks a call and plans its child, or returns the refusal.
func planSubagent(call Call, maxDepth int64) Result {
	var args struct {
		Description string `json:"description"`
		Prompt      string `json:"prompt"`
		Background  *bool  `json:"run_in_background"`
	}
	if err := decodeArgs(call, &args); err != nil {
		return errorResultf(NameInvalidArguments, CodeInvalidArguments, "%v", err)
	}
	if args.Background != nil && *args.Background {
		return errorResultf(NameFailed, CodeSubagentBackground, "run_in_background is disabled for this tool instance (enableRunInBackground: false)")
	}
	d := call.Delegation
	if d == nil {
		return errorResultf(NameFailed, CodeSubagentNotHere, "subagent tool requires a calling agent (the call did not come from a session that can start children)")
	}
	child := d.Depth + 1
	if child > maxDepth {
		return errorResultf(NameFailed, CodeSubagentDepth, "subagent depth %d exceeds maxDepth %d", child, maxDepth)
	}
	if strings.TrimSpace(args.Prompt) == "" {
		return errorResultf(NameInvalidArguments, CodeInvalidArguments, "%s", fmt.Sprintf("invalid arguments for tool %q: prompt must not be empty", SubagentName))
	}
	d.Plan = &SubagentPlan{Prompt: args.Prompt, Label: args.Description, Depth: child}
	return Result{Content: nil}
}
