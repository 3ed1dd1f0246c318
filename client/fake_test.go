package client

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	temporalclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"
)

// fakeTemporal is a Temporal client whose calls the tests script. Methods
// the tests do not script fall through to the nil embedded interface and
// panic.
type fakeTemporal struct {
	temporalclient.Client

	mu    sync.Mutex
	calls []string

	execute  func(opts temporalclient.StartWorkflowOptions, workflow any, args []any) (temporalclient.WorkflowRun, error)
	update   func(opts temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error)
	signal   func(workflowID, runID, name string, arg any) error
	cancel   func(workflowID, runID string) error
	query    func(workflowID, runID, queryType string) (converter.EncodedValue, error)
	list     func(req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error)
	history  func(workflowID, runID string) temporalclient.HistoryEventIterator
	describe func(workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error)
	getRun   func(workflowID, runID string) temporalclient.WorkflowRun
	// started are the runs update-with-start started, in order.
	started []temporalclient.WorkflowRun
	// searchAttrs are the namespace's custom search attributes; nil makes
	// the operator service fail.
	searchAttrs map[string]enumspb.IndexedValueType
}

// OperatorService answers ListSearchAttributes from searchAttrs.
func (f *fakeTemporal) OperatorService() operatorservice.OperatorServiceClient {
	return fakeOperator{attrs: f.searchAttrs}
}

// fakeOperator is the operator service of fakeTemporal.
type fakeOperator struct {
	operatorservice.OperatorServiceClient
	attrs map[string]enumspb.IndexedValueType
}

func (o fakeOperator) ListSearchAttributes(_ context.Context, req *operatorservice.ListSearchAttributesRequest, _ ...grpc.CallOption) (*operatorservice.ListSearchAttributesResponse, error) {
	if o.attrs == nil {
		return nil, serviceerror.NewPermissionDenied("operator API not allowed", "")
	}
	return &operatorservice.ListSearchAttributesResponse{CustomAttributes: o.attrs}, nil
}

func (f *fakeTemporal) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *fakeTemporal) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeTemporal) ExecuteWorkflow(_ context.Context, opts temporalclient.StartWorkflowOptions, workflow any, args ...any) (temporalclient.WorkflowRun, error) {
	f.record("execute " + opts.ID)
	return f.execute(opts, workflow, args)
}

// fakeStartOp is the start operation of an update-with-start on
// fakeTemporal. Like the SDK's, it resolves only when the start succeeds.
type fakeStartOp struct {
	opts     temporalclient.StartWorkflowOptions
	workflow any
	args     []any
	done     chan struct{}
	run      temporalclient.WorkflowRun
}

func (o *fakeStartOp) Get(ctx context.Context) (temporalclient.WorkflowRun, error) {
	select {
	case <-o.done:
		return o.run, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (f *fakeTemporal) NewWithStartWorkflowOperation(opts temporalclient.StartWorkflowOptions, workflow any, args ...any) temporalclient.WithStartWorkflowOperation {
	return &fakeStartOp{opts: opts, workflow: workflow, args: args, done: make(chan struct{})}
}

// UpdateWithStartWorkflow starts through execute and, when the start
// succeeds, updates through update, as one call.
func (f *fakeTemporal) UpdateWithStartWorkflow(_ context.Context, opts temporalclient.UpdateWithStartWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
	op := opts.StartWorkflowOperation.(*fakeStartOp)
	f.record("update-with-start " + op.opts.ID + " " + opts.UpdateOptions.UpdateName)
	run, err := f.execute(op.opts, op.workflow, op.args)
	if err != nil {
		return nil, fmt.Errorf("failed workflow start: %w", err)
	}
	op.run = run
	close(op.done)
	f.mu.Lock()
	f.started = append(f.started, run)
	f.mu.Unlock()
	h, err := f.update(opts.UpdateOptions)
	if fu, ok := h.(*fakeUpdate); ok && fu.runID == "" {
		fu.runID = run.GetRunID() // as the server reports it
	}
	return h, err
}

func (f *fakeTemporal) UpdateWorkflow(_ context.Context, opts temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
	f.record("update " + opts.WorkflowID + " " + opts.UpdateName)
	if f.update == nil {
		return nil, serviceerror.NewUnimplemented("no update scripted")
	}
	return f.update(opts)
}

func (f *fakeTemporal) SignalWorkflow(_ context.Context, workflowID, runID, name string, arg any) error {
	f.record("signal " + workflowID + " " + name)
	return f.signal(workflowID, runID, name, arg)
}

func (f *fakeTemporal) CancelWorkflow(_ context.Context, workflowID, runID string) error {
	f.record("cancel " + workflowID)
	return f.cancel(workflowID, runID)
}

func (f *fakeTemporal) QueryWorkflow(_ context.Context, workflowID, runID, queryType string, _ ...any) (converter.EncodedValue, error) {
	f.record("query " + workflowID + " " + queryType)
	return f.query(workflowID, runID, queryType)
}

func (f *fakeTemporal) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	f.record("list")
	return f.list(req)
}

func (f *fakeTemporal) GetWorkflowHistory(_ context.Context, workflowID, runID string, _ bool, _ enumspb.HistoryEventFilterType) temporalclient.HistoryEventIterator {
	f.record("history " + workflowID)
	return f.history(workflowID, runID)
}

func (f *fakeTemporal) DescribeWorkflow(_ context.Context, workflowID, runID string) (*temporalclient.WorkflowExecutionDescription, error) {
	f.record("describe " + workflowID)
	if f.describe == nil {
		return nil, serviceerror.NewNotFound("workflow not found for ID: " + workflowID)
	}
	resp, err := f.describe(workflowID, runID)
	if err != nil {
		return nil, err
	}
	return &temporalclient.WorkflowExecutionDescription{RawResponse: resp}, nil
}

// GetWorkflow returns getRun's run or, when the test scripts none, the run
// of that id (the latest for an empty one) an update-with-start started.
func (f *fakeTemporal) GetWorkflow(_ context.Context, workflowID, runID string) temporalclient.WorkflowRun {
	f.record("get " + workflowID)
	if f.getRun != nil {
		return f.getRun(workflowID, runID)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.started) - 1; i >= 0; i-- {
		if r := f.started[i]; r.GetID() == workflowID && (runID == "" || r.GetRunID() == runID) {
			return r
		}
	}
	panic("GetWorkflow of a run the test did not start: " + workflowID + "/" + runID)
}

// fakeRun is a workflow run whose result is scripted.
type fakeRun struct {
	temporalclient.WorkflowRun
	id, runID string
	result    any
	err       error
	gets      int // calls of Get
}

func (r *fakeRun) GetID() string    { return r.id }
func (r *fakeRun) GetRunID() string { return r.runID }
func (r *fakeRun) Get(_ context.Context, valuePtr any) error {
	r.gets++
	if r.err != nil {
		return r.err
	}
	return decodeInto(r.result, valuePtr)
}

// fakeUpdate is an update handle whose outcome is scripted.
type fakeUpdate struct {
	workflowID, runID, updateID string
	result                      any
	err                         error
	get                         func() // called when Get is, if set
}

func (h *fakeUpdate) WorkflowID() string { return h.workflowID }
func (h *fakeUpdate) RunID() string      { return h.runID }
func (h *fakeUpdate) UpdateID() string   { return h.updateID }
func (h *fakeUpdate) Get(_ context.Context, valuePtr any) error {
	if h.get != nil {
		h.get()
	}
	if h.err != nil {
		return h.err
	}
	return decodeInto(h.result, valuePtr)
}

// fakeValue is a query result.
type fakeValue struct{ v any }

func (v fakeValue) HasValue() bool         { return v.v != nil }
func (v fakeValue) Get(valuePtr any) error { return decodeInto(v.v, valuePtr) }

// fakeHistory iterates over fixed events.
type fakeHistory struct {
	events []*historypb.HistoryEvent
	err    error // returned by Next after the events, if set
}

func (h *fakeHistory) HasNext() bool { return len(h.events) > 0 || h.err != nil }
func (h *fakeHistory) Next() (*historypb.HistoryEvent, error) {
	if len(h.events) == 0 {
		err := h.err
		h.err = nil
		return nil, err
	}
	e := h.events[0]
	h.events = h.events[1:]
	return e, nil
}

// decodeInto copies v into valuePtr through JSON, as the default payload
// converter does.
func decodeInto(v, valuePtr any) error {
	if valuePtr == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, valuePtr)
}
