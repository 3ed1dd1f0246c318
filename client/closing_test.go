package client

import (
	"context"
	"errors"
	"net"
	"path"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	updatepb "go.temporal.io/api/update/v1"
	"go.temporal.io/api/workflowservice/v1"
	temporalclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sessionflow/sessionflow/wire"
)

// closingErr is the server's refusal of an update to a closing workflow,
// as history's ErrWorkflowClosing spells it.
func closingErr() error {
	return serviceerror.ToStatus(&serviceerror.ResourceExhausted{
		Cause:   enumspb.RESOURCE_EXHAUSTED_CAUSE_BUSY_WORKFLOW,
		Scope:   enumspb.RESOURCE_EXHAUSTED_SCOPE_NAMESPACE,
		Message: "workflow operation can not be applied because workflow is closing",
	}).Err()
}

// closingFrontend is a Temporal frontend whose UpdateWorkflowExecution
// refuses the first refusals calls as a closing workflow does and then
// answers the update completed with result.
type closingFrontend struct {
	workflowservice.UnimplementedWorkflowServiceServer
	refusals int
	result   wire.AppendResult

	mu    sync.Mutex
	calls []time.Time
}

func (f *closingFrontend) GetSystemInfo(context.Context, *workflowservice.GetSystemInfoRequest) (*workflowservice.GetSystemInfoResponse, error) {
	return &workflowservice.GetSystemInfoResponse{Capabilities: &workflowservice.GetSystemInfoResponse_Capabilities{}}, nil
}

func (f *closingFrontend) UpdateWorkflowExecution(_ context.Context, req *workflowservice.UpdateWorkflowExecutionRequest) (*workflowservice.UpdateWorkflowExecutionResponse, error) {
	f.mu.Lock()
	f.calls = append(f.calls, time.Now())
	n := len(f.calls)
	f.mu.Unlock()
	if n <= f.refusals {
		return nil, closingErr()
	}
	p, err := converter.GetDefaultDataConverter().ToPayloads(f.result)
	if err != nil {
		return nil, err
	}
	return &workflowservice.UpdateWorkflowExecutionResponse{
		UpdateRef: &updatepb.UpdateRef{WorkflowExecution: req.GetWorkflowExecution(), UpdateId: req.GetRequest().GetMeta().GetUpdateId()},
		Stage:     enumspb.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_COMPLETED,
		Outcome:   &updatepb.Outcome{Value: &updatepb.Outcome_Success{Success: p}},
	}, nil
}

// serveFrontend serves f on a local port and returns a Temporal client
// dialed to it with dialOpts.
func serveFrontend(t *testing.T, f *closingFrontend, dialOpts ...grpc.DialOption) temporalclient.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	workflowservice.RegisterWorkflowServiceServer(srv, f)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	tc, err := temporalclient.Dial(temporalclient.Options{
		HostPort:          ln.Addr().String(),
		ConnectionOptions: temporalclient.ConnectionOptions{DialOptions: dialOpts},
	})
	require.NoError(t, err)
	t.Cleanup(tc.Close)
	return tc
}

// attemptCounter counts the UpdateWorkflowExecution calls the SDK makes:
// dialed before DialOption, it sits between the SDK's own retries and
// RetryClosingInterceptor, so a resend of the interceptor is not counted.
type attemptCounter struct {
	mu sync.Mutex
	n  int
}

func (a *attemptCounter) option() grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if path.Base(method) == updateMethod {
			a.mu.Lock()
			a.n++
			a.mu.Unlock()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
}

// An append refused twice because its session's run is continuing as new
// is sent again by the interceptor within one attempt of the SDK (whose
// own next attempt waits 320-480 ms), and lands.
func TestAppendAtEndRefusedWhileClosingIsSentAgainAtOnce(t *testing.T) {
	f := &closingFrontend{refusals: 2, result: wire.AppendResult{NextSeq: 7}}
	var sdk attemptCounter
	c := New(serveFrontend(t, f, sdk.option(), DialOption()), Options{})
	res, err := c.AppendAtEnd(context.Background(), "s1", []wire.Event{{Type: wire.TypeTodoWrite}})
	require.NoError(t, err)
	assert.Equal(t, int64(7), res.NextSeq)
	require.Len(t, f.calls, 3)
	assert.Equal(t, 1, sdk.n, "the SDK made one attempt; the interceptor sent it again")
}

// Without the interceptor the SDK sends the refused update again by itself,
// after its service backoff: the loss RetryClosingInterceptor removes.
func TestSDKAloneWaitsAfterAClosingRefusal(t *testing.T) {
	f := &closingFrontend{refusals: 2, result: wire.AppendResult{NextSeq: 7}}
	var sdk attemptCounter
	c := New(serveFrontend(t, f, sdk.option()), Options{})
	res, err := c.AppendAtEnd(context.Background(), "s1", []wire.Event{{Type: wire.TypeTodoWrite}})
	require.NoError(t, err)
	assert.Equal(t, int64(7), res.NextSeq)
	require.Len(t, f.calls, 3)
	assert.Equal(t, 3, sdk.n, "each send is an attempt of the SDK's")
	assert.GreaterOrEqual(t, f.calls[1].Sub(f.calls[0]), 300*time.Millisecond)
	assert.GreaterOrEqual(t, f.calls[2].Sub(f.calls[1]), 600*time.Millisecond)
}

// invokeWith runs the interceptor on method over an invoker that answers
// with errs in turn (nil once they are used up), and returns the number
// of calls and the result.
func invokeWith(ctx context.Context, method string, errs ...error) (calls int, err error) {
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		calls++
		if calls <= len(errs) {
			return errs[calls-1]
		}
		return nil
	}
	err = RetryClosingInterceptor()(ctx, method, nil, nil, nil, invoker)
	return calls, err
}

const updateRPC = "/temporal.api.workflowservice.v1.WorkflowService/UpdateWorkflowExecution"

func TestRetryClosingInterceptorRetriesOnlyTheClosingRefusal(t *testing.T) {
	ctx := context.Background()
	other := func(cause enumspb.ResourceExhaustedCause, msg string) error {
		return serviceerror.ToStatus(&serviceerror.ResourceExhausted{Cause: cause, Message: msg}).Err()
	}
	cases := []struct {
		name      string
		method    string
		errs      []error
		wantCalls int
		wantErr   bool
	}{
		{"closing, then accepted", updateRPC, []error{closingErr(), closingErr()}, 3, false},
		{"closing past the retries", updateRPC, []error{closingErr(), closingErr(), closingErr(), closingErr(), closingErr(), closingErr(), closingErr()}, 7, true},
		{"in-flight limit", updateRPC, []error{other(enumspb.RESOURCE_EXHAUSTED_CAUSE_CONCURRENT_LIMIT, "limit on number of concurrent in-flight updates has been reached (64)")}, 1, true},
		{"busy workflow", updateRPC, []error{other(enumspb.RESOURCE_EXHAUSTED_CAUSE_BUSY_WORKFLOW, "Workflow is busy.")}, 1, true},
		{"unavailable", updateRPC, []error{status.Error(codes.Unavailable, "workflow update was aborted")}, 1, true},
		{"not a status", updateRPC, []error{errors.New("workflow is closing")}, 1, true},
		{"another method", "/temporal.api.workflowservice.v1.WorkflowService/SignalWorkflowExecution", []error{closingErr()}, 1, true},
		{"success", updateRPC, nil, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls, err := invokeWith(ctx, tc.method, tc.errs...)
			assert.Equal(t, tc.wantCalls, calls)
			if tc.wantErr {
				require.Error(t, err)
				assert.Equal(t, tc.errs[len(tc.errs)-1], err, "the last answer is returned unchanged")
			} else {
				require.NoError(t, err)
			}
		})
	}
}

func TestRetryClosingInterceptorStopsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls, err := invokeWith(ctx, updateRPC, closingErr(), closingErr())
	assert.Equal(t, 1, calls)
	assert.Equal(t, codes.ResourceExhausted, status.Code(err))
}
