package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/wire"
)

// updateCallbacks records an update's outcome in the test environment.
type updateCallbacks struct {
	rejected error
	result   any
	err      error
}

func (c *updateCallbacks) Accept()                 {}
func (c *updateCallbacks) Reject(err error)        { c.rejected = err }
func (c *updateCallbacks) Complete(r any, e error) { c.result, c.err = r, e }

// decodeOnceWorkflow registers the update "U" (a WaitTurnRequest) whose
// validator, when mark is set, keeps the request it decoded with its
// message id marked, and whose handler answers the message id it takes:
// marked when it took the validator's request, plain when it decoded the
// payload itself. It returns how many requests are still kept at its end.
func decodeOnceWorkflow(ctx workflow.Context, mark bool) (int, error) {
	var d decodedRequests[wire.WaitTurnRequest]
	err := workflow.SetUpdateHandlerWithOptions(ctx, "U",
		func(ctx workflow.Context, in converter.RawValue) (string, error) {
			req, err := d.take(ctx, "U", in)
			return req.MessageID, err
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in converter.RawValue) error {
			var req wire.WaitTurnRequest
			if err := decodeRequest("U", in, &req); err != nil {
				return err
			}
			if mark {
				req.MessageID = "validator:" + req.MessageID
				d.keep(ctx, req)
			}
			return nil
		}})
	if err != nil {
		return 0, err
	}
	err = workflow.Sleep(ctx, time.Hour)
	return len(d.byID), err
}

func TestDecodedRequestsHandlerTakesWhatTheValidatorKept(t *testing.T) {
	for _, c := range []struct {
		name string
		mark bool
		want []string
	}{
		// The validator's request reaches the handler, once per update.
		{"kept", true, []string{"validator:m1", "validator:m2"}},
		// Nothing kept (as on replay): the handler decodes the payload.
		{"not kept", false, []string{"m1", "m2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			var cbs []*updateCallbacks
			for i, id := range []string{"m1", "m2"} {
				cb := &updateCallbacks{}
				cbs = append(cbs, cb)
				env.RegisterDelayedCallback(func() {
					env.UpdateWorkflow("U", "u"+id, cb, wire.WaitTurnRequest{MessageID: id})
				}, time.Duration(i+1)*time.Minute)
			}
			env.ExecuteWorkflow(decodeOnceWorkflow, c.mark)
			require.NoError(t, env.GetWorkflowError())
			var got []string
			for _, cb := range cbs {
				require.NoError(t, cb.rejected)
				require.NoError(t, cb.err)
				got = append(got, cb.result.(string))
			}
			require.Equal(t, c.want, got)
			var kept int
			require.NoError(t, env.GetWorkflowResult(&kept))
			require.Equal(t, 0, kept, "a request stays kept after its handler took it")
		})
	}
}
