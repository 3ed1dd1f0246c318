package temporalconn

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"google.golang.org/grpc"
)

// refusingFrontend refuses the first two UpdateWorkflowExecution calls as a
// workflow that continues as new does, then answers.
type refusingFrontend struct {
	workflowservice.UnimplementedWorkflowServiceServer
	calls atomic.Int32
}

func (f *refusingFrontend) GetSystemInfo(context.Context, *workflowservice.GetSystemInfoRequest) (*workflowservice.GetSystemInfoResponse, error) {
	return &workflowservice.GetSystemInfoResponse{Capabilities: &workflowservice.GetSystemInfoResponse_Capabilities{}}, nil
}

func (f *refusingFrontend) UpdateWorkflowExecution(context.Context, *workflowservice.UpdateWorkflowExecutionRequest) (*workflowservice.UpdateWorkflowExecutionResponse, error) {
	if f.calls.Add(1) <= 2 {
		// The server's answer as its interceptors encode a serviceerror.
		return nil, serviceerror.ToStatus(&serviceerror.ResourceExhausted{
			Cause:   enumspb.RESOURCE_EXHAUSTED_CAUSE_BUSY_WORKFLOW,
			Message: "workflow operation can not be applied because workflow is closing",
		}).Err()
	}
	return &workflowservice.UpdateWorkflowExecutionResponse{Stage: enumspb.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_COMPLETED}, nil
}

// The programs' clients send an update the server refused because the
// workflow is closing again within the one call: a raw call, which the
// SDK does not retry, gets the answer after two refusals.
func TestClientOptionsRetryClosingRefusals(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &refusingFrontend{}
	srv := grpc.NewServer()
	workflowservice.RegisterWorkflowServiceServer(srv, f)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	opts, err := ClientOptions(envconfig.ClientConfigProfile{Address: ln.Addr().String(), Namespace: "default"})
	require.NoError(t, err)
	tc, err := client.Dial(opts)
	require.NoError(t, err)
	defer tc.Close()
	resp, err := tc.WorkflowService().UpdateWorkflowExecution(context.Background(), &workflowservice.UpdateWorkflowExecutionRequest{Namespace: "default"})
	require.NoError(t, err)
	assert.Equal(t, enumspb.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_COMPLETED, resp.GetStage())
	assert.Equal(t, int32(3), f.calls.Load())
}
