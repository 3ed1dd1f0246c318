package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sessionflow/sessionflow/provider"
)

// namePattern is the tool-name rule model APIs apply.
var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Registry holds the tools a worker offers. It is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]entry
}

// entry is a registered tool with its compiled schema.
type entry struct {
	tool   Tool
	schema *jsonschema.Schema
}

// NewRegistry returns a registry holding tools, or the first error Register
// reports for one of them.
func NewRegistry(tools ...Tool) (*Registry, error) {
	r := &Registry{tools: map[string]entry{}}
	for _, t := range tools {
		if err := r.Register(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds t. It refuses a name that does not match
// ^[a-zA-Z0-9_-]{1,64}$ (ErrInvalidName), a name already registered
// (ErrDuplicate), a nil Run (ErrNoRun), and a schema that is missing, does
// not compile or whose root is not of type object (ErrInvalidSchema). A
// schema's external $refs are refused: it must be self-contained.
func (r *Registry) Register(t Tool) error {
	if !namePattern.MatchString(t.Name) {
		return fmt.Errorf("%w %q: want 1 to 64 letters, digits, '_' or '-'", ErrInvalidName, t.Name)
	}
	if t.Run == nil {
		return fmt.Errorf("%w: tool %q", ErrNoRun, t.Name)
	}
	s, err := compileSchema(t.Schema)
	if err != nil {
		return fmt.Errorf("tool %q: %w", t.Name, err)
	}
	t.Schema = bytes.Clone(t.Schema)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tools == nil {
		r.tools = map[string]entry{}
	}
	if _, ok := r.tools[t.Name]; ok {
		return fmt.Errorf("%w: tool %q is already registered", ErrDuplicate, t.Name)
	}
	r.tools[t.Name] = entry{tool: t, schema: s}
	return nil
}

// Lookup returns the tool registered under name.
func (r *Registry) Lookup(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.tools[name]
	return e.tool, ok
}

// Names returns the registered tool names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.tools))
	for n := range r.tools {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Specs returns the tools as offered to a model, sorted by name.
func (r *Registry) Specs() []provider.Tool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	specs := make([]provider.Tool, 0, len(r.tools))
	for _, e := range r.tools {
		specs = append(specs, provider.Tool{
			Name:        e.tool.Name,
			Description: e.tool.Description,
			Schema:      bytes.Clone(e.tool.Schema),
		})
	}
	slices.SortFunc(specs, func(a, b provider.Tool) int { return strings.Compare(a.Name, b.Name) })
	return specs
}

// Execute runs the tool called name and never fails: every failure becomes
// an IsError result with a text and an ErrorInfo.
//
//   - no tool of that name: TOOL_NOT_FOUND, the text lists the available tools;
//   - arguments that are not JSON, not an object, or fail the schema:
//     INVALID_ARGUMENTS, the text names each failing property and why;
//   - a Run error wrapping ErrOutsideCwd: OUTSIDE_CWD;
//   - a Run error wrapping ErrPathDenied: PATH_DENIED;
//   - a context already done, or a Run error that is the context's error
//     after it is done: ABORTED;
//   - any other Run error, or a panic in Run: TOOL_FAILED with its text.
//
// Empty arguments mean {}; Run sees the arguments compacted. An IsError
// result a tool returns without an ErrorInfo gets {ToolFailedError,
// TOOL_FAILED}.
func (r *Registry) Execute(ctx context.Context, name string, call Call) Result {
	r.mu.RLock()
	e, ok := r.tools[name]
	r.mu.RUnlock()
	if !ok {
		available := r.Names()
		list := "none"
		if len(available) > 0 {
			list = strings.Join(available, ", ")
		}
		return errorResultf(NameNotFound, CodeNotFound, "tool %q not found; available tools: %s", name, list)
	}
	args, res, ok := checkArguments(e, call.Arguments)
	if !ok {
		return res
	}
	call.Arguments = args
	if err := ctx.Err(); err != nil {
		return errorResultf(NameAborted, CodeAborted, "tool call %q aborted before it ran: %v", name, context.Cause(ctx))
	}
	res, err := runRecovered(ctx, e.tool, call)
	if err != nil {
		return failure(ctx, name, err)
	}
	if res.Content == nil {
		res.Content = []provider.Block{}
	}
	if res.IsError && res.Error == nil {
		res.Error = &ErrorInfo{Name: NameFailed, Code: CodeFailed}
	}
	return res
}

// checkArguments decodes and validates raw against the tool's schema. It
// returns the compacted arguments, or ok=false and the INVALID_ARGUMENTS
// result.
func checkArguments(e entry, raw json.RawMessage) (json.RawMessage, Result, bool) {
	invalid := func(format string, args ...any) (json.RawMessage, Result, bool) {
		return nil, errorResultf(NameInvalidArguments, CodeInvalidArguments, "invalid arguments for tool %q:"+format,
			append([]any{e.tool.Name}, args...)...), false
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		trimmed = []byte("{}")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(trimmed))
	if err != nil {
		return invalid(" not valid JSON: %v", err)
	}
	if _, isObj := v.(map[string]any); !isObj {
		return invalid(" the arguments must be a JSON object, got %s", jsonKind(v))
	}
	if err := e.schema.Validate(v); err != nil {
		return invalid("\n%s", validationText(err))
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, trimmed); err != nil {
		return invalid(" not valid JSON: %v", err)
	}
	return buf.Bytes(), Result{}, true
}

// panicError is a panic recovered from a tool's Run.
type panicError struct{ value any }

func (p panicError) Error() string { return fmt.Sprintf("panic: %v", p.value) }

// runRecovered calls t.Run, turning a panic into an error.
func runRecovered(ctx context.Context, t Tool, call Call) (res Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			slog.ErrorContext(ctx, "tool panicked", "tool", t.Name, "callId", call.CallID,
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			res, err = Result{}, panicError{value: v}
		}
	}()
	return t.Run(ctx, call)
}

// failure maps a Run error to its result.
func failure(ctx context.Context, name string, err error) Result {
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		return errorResultf(NameAborted, CodeAborted, "tool call %q aborted: %v", name, context.Cause(ctx))
	}
	if errors.Is(err, ErrPathDenied) {
		return errorResultf(NamePathDenied, CodePathDenied, "%v", err)
	}
	if errors.Is(err, ErrOutsideCwd) {
		return errorResultf(NameOutsideCwd, CodeOutsideCwd, "%v", err)
	}
	return errorResultf(NameFailed, CodeFailed, "tool %q failed: %v", name, err)
}
