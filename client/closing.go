package client

import (
	"context"
	"path"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// A session's run continues as new once its history reaches
// wire.Options.ContinueAsNewEvents events (1,000 by default). An update that reaches the run while
// it closes is refused by the server with ResourceExhausted, cause
// BUSY_WORKFLOW, "workflow operation can not be applied because workflow is
// closing": either at admission (the run's last task is being processed) or
// when the run closes with the update admitted but not yet handed to the
// workflow. Either way the update was not applied, and the SDK sends it
// again, with the same update id, after its service backoff: 400 ms (give or
// take a fifth), then 800 ms. The next run exists as soon as the old one has closed, so that
// wait is lost, and with callers appending at the end (AppendAtEnd) it hits
// every caller whose append was sent during the run's last workflow task.
//
// RetryClosingInterceptor sends such a refused update again at once, within
// the SDK's attempt, with short waits.
const (
	closingFirstWait = 5 * time.Millisecond
	closingMaxWait   = 80 * time.Millisecond
	// closingRetries bounds the quick retries of one SDK attempt (about
	// a quarter of a second of waits); past them the refusal goes back to
	// the SDK, which backs off as before.
	closingRetries = 6
)

// closingMessage is the text of the server's refusal of a request to a
// closing workflow (go.temporal.io/server service/history/consts
// ErrWorkflowClosing).
const closingMessage = "workflow is closing"

// updateMethod is the gRPC method whose refusals RetryClosingInterceptor
// retries.
const updateMethod = "UpdateWorkflowExecution"

// RetryClosingInterceptor returns a gRPC client interceptor that sends an
// UpdateWorkflowExecution request again, after 5 ms and then doubling waits
// up to 80 ms, at most 6 times, while the server refuses it because the
// workflow is closing (a session's run continuing as new). The refused
// update was not applied, and the SDK would send it again itself, with the
// same update id, after 400 ms or more; any other answer, and the refusal
// after the last retry, is returned unchanged. Dial the Temporal client a
// Client uses with it (DialOption) so that appends sent while a session
// continues as new wait for the next run, not for the SDK's backoff.
func RetryClosingInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err == nil || path.Base(method) != updateMethod {
			return err
		}
		wait := closingFirstWait
		for i := 0; i < closingRetries && isClosing(err); i++ {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
			wait = min(2*wait, closingMaxWait)
			err = invoker(ctx, method, req, reply, cc, opts...)
		}
		return err
	}
}

// DialOption returns RetryClosingInterceptor as a dial option, for
// temporalclient.ConnectionOptions.DialOptions.
func DialOption() grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(RetryClosingInterceptor())
}

// isClosing reports whether err is the server's refusal of a request to a
// closing workflow.
func isClosing(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	re, ok := serviceerror.FromStatus(st).(*serviceerror.ResourceExhausted)
	return ok && re.Cause == enumspb.RESOURCE_EXHAUSTED_CAUSE_BUSY_WORKFLOW && strings.Contains(re.Message, closingMessage)
}
